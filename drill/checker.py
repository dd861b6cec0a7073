"""The drill's checker (pure): what was sent, with every outcome, against
what can be read back, round by round.

Outcomes of a send (``Op.outcome``):
  ``ok``        SEND_OK with every replica the group asks for
  ``degraded``  SEND_OK under ``min_sync_replicas`` (fewer slaves in sync)
  ``stored``    stored, not durable yet: FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT,
                SLAVE_NOT_AVAILABLE
  ``failed``    refused: nothing was stored
  ``unknown``   no answer (a timeout, a dead connection): stored or not

Jepsen's total-queue figures: ``lost`` acked (ok or degraded) and never read
back, or not readable while a round's fault was still in place
(``unreadable_under_fault``: a read that waited for the heal would not see
an acked message the new master holds but does not show); ``unexpected`` read
back but never sent; ``duplicated`` extra copies read back; ``recovered`` a
send not acked (stored, failed, unknown) read back anyway. And of the
client API: ``id_conflicts`` message ids that named two messages (two acked
sends given one id, or an acked send's id read back on another body);
``foreign_errors`` sends that raised an exception that is not a duomq error
(by name).
"""

from __future__ import annotations

import collections
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

ACKED = ("ok", "degraded")


@dataclass(frozen=True)
class Op:
    body: bytes
    worker: int
    seq: int
    started: float           # monotonic s
    ended: float
    outcome: str
    status: str = ""         # the answer's status or the error's name
    group: str = ""          # broker group that answered
    epoch: int = 0           # its master's epoch (0: not known)
    queue: int = -1
    offset: int = -1         # the commit-log offset it was stored at (-1: not known)
    msg_id: str = ""         # the id the send's answer gave ("": none)
    foreign: bool = False    # it raised an exception that is not a duomq error
    kind: str = "plain"      # plain, delayed or timer (due at ``due``), transactional (a commit)
    due: float = 0.0         # monotonic s a delayed message comes due (0: at once)


TIMER_KINDS = frozenset({"delayed", "timer"})    # held by the broker until due


@dataclass(frozen=True)
class Truncation:
    """A broker cut its log (its own log line): the bytes past ``offset``,
    which the master of ``epoch`` does not hold."""
    broker: str              # group/id
    group: str
    offset: int
    epoch: int


TRUNCATION = re.compile(r"truncated (\d+) bytes \((\d+) records\) past offset (\d+) that "
                        r"the master of epoch (\d+) does not hold")


def truncations_in(log_text: str, broker: str, group: str) -> list[Truncation]:
    """The truncations a broker's log records."""
    return [Truncation(broker, group, int(m.group(3)), int(m.group(4)))
            for m in TRUNCATION.finditer(log_text) if int(m.group(1)) > 0]


def truncated_acked(ops: list[Op], cuts: list[Truncation]) -> int:
    """Acked sends a broker cut from its log: stored by a master of an
    earlier epoch at or past where the cutting broker's new epoch began.
    The new master's epoch starts at its own log's end, so such a record is
    not in the new master's log: under SYNC replication this must never
    happen (the cross-check of ``lost`` from the brokers' own logs)."""
    hit = set()
    for cut in cuts:
        for op in ops:
            if op.outcome in ACKED and op.group == cut.group and 0 < op.epoch < cut.epoch \
                    and op.offset >= cut.offset:
                hit.add(op.body)
    return len(hit)


@dataclass(frozen=True)
class Round:
    index: int
    fault: str               # what was done, e.g. "kill -9 broker-a/0"
    fault_at: float
    healed_at: float | None = None
    recovered_at: float | None = None   # the runner saw the group write again
    notes: dict = field(default_factory=dict)


@dataclass
class Report:
    scenario: str
    rounds: int = 0
    attempted: int = 0
    acked: int = 0
    acked_degraded: int = 0
    stored_not_durable: int = 0
    failed: int = 0
    unknown: int = 0
    lost: int = 0
    unreadable_under_fault: int = 0   # acked, not readable before a round's heal (in lost)
    unexpected: int = 0
    duplicated: int = 0
    duplicated_rewrites: int = 0      # of duplicated: timers moved and transactions
                                      # committed again by the next master
    timers_acked: int = 0             # acked timer and delayed messages (the mixed load)
    timers_lost: int = 0              # of them, never read back (in lost)
    timers_fired_twice: int = 0       # extra copies of them read back (in duplicated)
    longest_gap_s: float = 0.0        # the longest time in any round without an acked send
    truncated_acked: int = -1         # acked sends a broker cut from its log (-1: logs not read)
    recovered: int = 0
    order_violations: int = 0
    id_conflicts: int = 0             # message ids that named two messages
    foreign_errors: dict = field(default_factory=dict)   # non-duomq exceptions, by name
    rto_s: list = field(default_factory=list)
    split_brain_s: float = 0.0
    per_round: list = field(default_factory=list)
    lost_bodies: list = field(default_factory=list)   # the first few, for a person
    duplicated_bodies: list = field(default_factory=list)   # the first few, for a person
    guarantees_held: bool = True
    verdict: str = ""
    notes: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def rto(ops: list[Op], fault_at: float, until: float | None) -> float | None:
    """The round's longest write outage: the longest time from the fault on
    (up to ``until``) without an ack (ok or degraded), the first gap
    measured from the fault itself. A master that keeps acking for a while
    after its fault (a partition, until its lease runs out) is not taken for
    one that recovered at once. None: no ack after the fault at all."""
    acks = sorted(op.ended for op in ops if op.outcome in ACKED and op.ended >= fault_at
                  and (until is None or op.ended < until))
    if not acks:
        return None
    worst, before = 0.0, fault_at
    for t in acks:
        worst, before = max(worst, t - before), t
    return round(worst, 3)


def split_brain(ops: Iterable[Op]) -> float:
    """Seconds during which acks from two epochs of one group interleaved:
    per group, the overlap of each epoch's [first ack, last ack] span with
    the spans of the others (two masters taking writes at once)."""
    spans: dict[tuple[str, int], list[float]] = {}
    for op in ops:
        # a transaction's ack comes at its end, which a later master may
        # answer: its epoch (the half's) is not the answering master's
        if op.outcome in ACKED and op.epoch and op.kind != "transactional":
            s = spans.setdefault((op.group, op.epoch), [op.ended, op.ended])
            s[0], s[1] = min(s[0], op.ended), max(s[1], op.ended)
    total = 0.0
    by_group: dict[str, list[tuple[int, list[float]]]] = {}
    for (group, epoch), span in spans.items():
        by_group.setdefault(group, []).append((epoch, span))
    for entries in by_group.values():
        entries.sort()
        for i, (_e1, a) in enumerate(entries):
            for _e2, b in entries[i + 1:]:
                total += max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
    return round(total, 3)


def longest_gap(ops: list[Op], start: float, end: float) -> float:
    """The longest time within [start, end] without a send acked (SEND_OK
    or degraded): what a writer waited at worst during a round."""
    acks = sorted(op.ended for op in ops if op.outcome in ACKED and start <= op.ended <= end)
    points = [start, *acks, end]
    return round(max(b - a for a, b in zip(points, points[1:], strict=False)), 3)


def order_violations(ops: list[Op], read_back: list[tuple[int, bytes]]) -> int:
    """Acked messages of one worker read back out of send order within a
    queue (first copies only: a retried duplicate is counted as such, not
    as disorder). ``read_back``: (queue key, body) in each queue's order."""
    acked = {op.body: op for op in ops if op.outcome in ACKED}
    seen: set[bytes] = set()
    last: dict[tuple[int, int], int] = {}
    bad = 0
    for queue, body in read_back:
        op = acked.get(body)
        if op is None or body in seen:
            continue
        seen.add(body)
        key = (queue, op.worker)
        if op.seq < last.get(key, -1):
            bad += 1
        last[key] = max(last.get(key, -1), op.seq)
    return bad


def id_conflicts(ops: Iterable[Op], read_ids: dict[str, bytes] | None) -> int:
    """Message ids that named two messages: an id two acked sends were
    given for different bodies, or an acked send's id that the read-back
    (``read_ids``: id -> body read) found on another body."""
    given: dict[str, bytes] = {}
    bad: set[str] = set()
    for op in ops:
        if op.outcome not in ACKED or not op.msg_id:
            continue
        if given.setdefault(op.msg_id, op.body) != op.body:
            bad.add(op.msg_id)
        elif read_ids is not None and read_ids.get(op.msg_id, op.body) != op.body:
            bad.add(op.msg_id)
    return len(bad)


def check(scenario: str, ops: list[Op], read_back: list[tuple[int, bytes]],
          rounds: list[Round], *, durable: bool, ordered: bool = False,
          idempotent: bool = True, cuts: list[Truncation] | None = None,
          unreadable: set[bytes] | None = None,
          read_ids: dict[str, bytes] | None = None) -> Report:
    """The report of a drill. ``durable``: the cluster promises no acked
    message is lost (SYNC replication with SYNC_FLUSH): then ``lost`` must
    be 0 and the guarantees fail otherwise. ``idempotent``: the producers
    were (the default): a body stored twice anywhere, in any queue of any
    group, fails the guarantees too. ``unreadable``: the acked bodies a read
    under a round's fault did not find (each round's ``unreadable`` note):
    lost, though they were read back after the heal."""
    counts = collections.Counter(body for _q, body in read_back)
    sent = {op.body: op for op in ops}
    outcomes = collections.Counter(op.outcome for op in ops)
    acked = {b for b, op in sent.items() if op.outcome in ACKED}
    hidden = acked & (unreadable or set())
    lost = sorted((acked - set(counts)) | hidden)
    r = Report(scenario=scenario, rounds=len(rounds), attempted=len(ops),
               acked=outcomes["ok"], acked_degraded=outcomes["degraded"],
               stored_not_durable=outcomes["stored"], failed=outcomes["failed"],
               unknown=outcomes["unknown"], lost=len(lost),
               unreadable_under_fault=len(hidden),
               unexpected=len(set(counts) - set(sent)),
               duplicated=sum(n - 1 for n in counts.values() if n > 1),
               duplicated_rewrites=sum(n - 1 for b, n in counts.items()
                                       if n > 1 and b in sent and sent[b].kind != "plain"),
               recovered=sum(1 for b, op in sent.items()
                             if op.outcome in ("failed", "unknown") and b in counts),
               order_violations=order_violations(ops, read_back) if ordered else 0,
               split_brain_s=split_brain(ops), id_conflicts=id_conflicts(ops, read_ids),
               foreign_errors=dict(collections.Counter(op.status for op in ops if op.foreign)),
               lost_bodies=[b.decode(errors="replace") for b in lost[:10]],
               duplicated_bodies=[b.decode(errors="replace") for b in sorted(
                   (b for b, n in counts.items() if n > 1),      # a timer's last
                   key=lambda b: (b in sent and sent[b].kind != "plain", b))][:10])
    timers = {b for b, op in sent.items() if op.kind in TIMER_KINDS and op.outcome in ACKED}
    r.timers_acked = len(timers)
    r.timers_lost = len(timers & set(lost))
    r.timers_fired_twice = sum(counts[b] - 1 for b in timers if counts[b] > 1)
    if r.timers_fired_twice:              # a level's (the schedule service's) or a timer's
        twice: collections.Counter[str] = collections.Counter()
        for b in timers:
            if counts[b] > 1:
                twice[sent[b].kind] += counts[b] - 1
        r.notes["fired_twice_by_kind"] = dict(twice)
    ends = [rd.fault_at for rd in rounds[1:]] + [None]
    last = max((op.ended for op in ops), default=0.0)
    for rd, until in zip(rounds, ends, strict=True):
        window = [op for op in ops if op.started >= rd.fault_at
                  and (until is None or op.started < until)]
        t = rto(ops, rd.fault_at, until)
        r.rto_s.append(t)
        gap = longest_gap(ops, rd.fault_at, until if until is not None else last)
        r.longest_gap_s = max(r.longest_gap_s, gap)
        r.per_round.append({
            "round": rd.index, "fault": rd.fault, "rto_s": t, "longest_gap_s": gap,
            "healed_after_s": round(rd.healed_at - rd.fault_at, 3) if rd.healed_at else None,
            "outcomes": dict(collections.Counter(op.outcome for op in window)),
            "epochs": sorted({op.epoch for op in window if op.outcome in ACKED and op.epoch}),
            **rd.notes})
    kinds = collections.Counter(op.kind for op in ops if op.outcome in ACKED)
    if set(kinds) - {"plain"}:                 # the mixed load: what each producer had acked
        r.notes["acked_by_kind"] = dict(kinds)
        r.notes["read_back_by_kind"] = dict(collections.Counter(
            sent[b].kind for b in counts if b in sent))
    problems = _problems(r, ops, durable, idempotent, cuts)
    r.guarantees_held = not problems
    if not durable and r.lost:
        r.notes["async"] = (f"{r.lost} acked message(s) missing: ASYNC replication or "
                            f"ASYNC_FLUSH may lose what a failed master had not passed on")
    r.verdict = "; ".join(problems) if problems else "guarantees held"
    return r


def _problems(r: Report, ops: list[Op], durable: bool, idempotent: bool,
              cuts: list[Truncation] | None) -> list[str]:
    """What broke a guarantee, for the verdict (``r.truncated_acked`` and
    its note are filled here, from the brokers' cuts)."""
    problems: list[str] = []
    if durable and r.lost:
        problems.append(f"{r.lost} acked message(s) lost under SYNC replication + SYNC_FLUSH"
                        + (f" ({r.unreadable_under_fault} of them unreadable while a fault was "
                           f"in place)" if r.unreadable_under_fault else ""))
    if r.unexpected:
        problems.append(f"{r.unexpected} message(s) read back that were never sent")
    if cuts is not None:
        r.truncated_acked = truncated_acked(ops, cuts)
        r.notes["truncations"] = [f"{c.broker} cut past {c.offset} (epoch {c.epoch})"
                                  for c in cuts][:20]
        if durable and r.truncated_acked:
            problems.append(f"{r.truncated_acked} acked message(s) cut from a broker's log")
    # a re-write of acked data done again by the next master (a timer moved,
    # a transaction committed, the record of it not replicated yet) is a
    # duplicate its consumer recognises (ORIGIN_MESSAGE_ID, TRAN_HALF_ID),
    # never a loss: counted, not failed
    if idempotent and r.duplicated - r.duplicated_rewrites:
        problems.append(f"{r.duplicated - r.duplicated_rewrites} extra copies of messages from "
                        f"idempotent producers")
    if r.split_brain_s > 0:
        problems.append(f"two masters of one group acked writes for {r.split_brain_s} s")
    if r.order_violations:
        problems.append(f"{r.order_violations} message(s) read back out of order")
    if r.id_conflicts:
        problems.append(f"{r.id_conflicts} message id(s) named two messages")
    if r.foreign_errors:
        problems.append(f"sends raised exceptions that are not duomq errors: "
                        f"{sorted(r.foreign_errors.items())}")
    if any(t is None for t in r.rto_s):
        problems.append("a round ended with no acked write after its fault")
    return problems
