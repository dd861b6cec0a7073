"""Failover decisions, pure functions of a snapshot (Patroni's run_cycle style),
testable without a server.

The in-sync set (ISR, a persistent node the master keeps current) names the
brokers that hold every acknowledged message: the master and its in-sync
slaves. When the master's ephemeral node is gone, the live ISR member with the
highest commit-log offset (then the lowest id) claims the master; a broker
outside the ISR only with ``allow_lagging_promotion``. A new group (no ISR
yet) elects among everyone, which at offset 0 means broker 0.

A broker returning from an older epoch truncates its log to the start offset
of the first epoch after its own: everything before it is shared with the
new master, anything after may differ (``truncation_point``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Member:
    broker_id: int
    max_offset: int
    epoch: int = 0              # the last epoch this broker led or followed
    stepping_down: bool = False  # a master handing over (planned switchover)
    promotable: bool = True      # false: a read replica
    silent: bool = False         # its node went unrefreshed for a lease: presumed dead
    # it held all its master had as it last heard (a slave whose link never
    # heard the master, or not caught up, cannot vouch for the others' writes)
    caught_up: bool = True


@dataclass(frozen=True)
class Snapshot:
    members: tuple[Member, ...]          # live brokers of the group
    isr: frozenset[int] | None           # None: a new group with no ISR yet
    master_id: int | None                # holder of the master node, if any
    allow_lagging_promotion: bool = False
    preferred: int | None = None         # switchover target


@dataclass(frozen=True)
class Decision:
    candidate: int | None
    reason: str                           # logged every cycle
    lagging: bool = False                 # promoted from outside the ISR
    eligible: tuple[int, ...] = field(default=())


def choose_master(s: Snapshot) -> Decision:
    """Who should claim the master now (None: nobody, with the reason)."""
    if s.master_id is not None:
        return Decision(None, f"broker {s.master_id} is master")
    live = [m for m in s.members if not m.stepping_down and m.promotable and not m.silent]
    if not live:
        return Decision(None, "no live broker can take over")
    in_isr = live if s.isr is None else [m for m in live if m.broker_id in s.isr]
    lagging = False
    if not in_isr:
        if not s.allow_lagging_promotion:
            ids = sorted(m.broker_id for m in live)
            return Decision(None, f"no in-sync broker is alive (ISR {sorted(s.isr or ())}, live "
                                  f"{ids}); allow_lagging_promotion is off, so nobody is "
                                  f"promoted and no acknowledged message is lost")
        in_isr, lagging = live, True
    best = max(in_isr, key=lambda m: (m.broker_id == s.preferred, m.max_offset, -m.broker_id))
    # a silent member is no candidate, but one that last said it held more
    # than the best live one may be alive after all: it is waited for. Its
    # node may be a second old, so it may hold more than it said: unless the
    # best live one held all its master had when it last heard it, every
    # silent in-sync member is waited for (a slave restarted while the other
    # acked writes alone, the master dead and the other paused: same stale
    # offsets, and the restarted one took over without them)
    ahead = [m for m in s.members if m.silent and m.promotable
             and (m.max_offset > best.max_offset or not best.caught_up)
             and (s.isr is None or m.broker_id in s.isr)]
    if ahead:
        m = max(ahead, key=lambda m: m.max_offset)
        why = f"more than any live candidate ({best.max_offset})" \
            if m.max_offset > best.max_offset else \
            f"and broker {best.broker_id}, the best live candidate (offset {best.max_offset}), " \
            f"did not hold all its master had as it last heard it"
        return Decision(None, f"broker {m.broker_id} is silent but last held offset "
                              f"{m.max_offset}, {why}: waiting for it to return or for its "
                              f"session to end")
    why = "lagging broker (allow_lagging_promotion)" if lagging else "in-sync broker"
    return Decision(best.broker_id, f"{why} {best.broker_id} at offset {best.max_offset} takes "
                                    f"over", lagging, tuple(sorted(m.broker_id for m in in_isr)))


def truncation_point(local_epoch: int, local_max: int, history: list[tuple[int, int]]) -> int:
    """Where a broker whose log was last written in ``local_epoch`` must cut it
    before following: where the group's log stopped holding what that
    epoch wrote (``cut_from``: the lowest start of a later epoch, which a
    lagging promotion may put below the next epoch's), or its own end if
    no epoch is later."""
    cut = cut_from(local_epoch, history)
    return local_max if cut is None else min(local_max, cut)


def cut_from(epoch: int, history: Iterable[tuple[int, int]]) -> int | None:
    """From which offset the group's log no longer holds what the master of
    ``epoch`` wrote: the lowest start offset of a later epoch in ``history``
    [(epoch, start_offset)] (a later master may start below an earlier
    one's start, promoted lagging), None when no epoch came after it."""
    later = [start for e, start in history if e > epoch]
    return min(later) if later else None

