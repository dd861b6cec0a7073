"""The drill's checker for share groups (pure): every stored message acked
exactly once by some reader, or in the group's dead-letter queue; none
delivered again after an ack of it succeeded; redeliveries counted."""

from __future__ import annotations

import collections
from typing import NamedTuple


class Event(NamedTuple):
    kind: str        # d: delivered, i: ack sent, a: acked, r: ack refused, u: outcome unknown
    body: bytes
    delivery: int    # the delivery count
    reader: int


def unanswered(events: list[Event]) -> set[bytes]:
    """Bodies whose ack went out without an outcome: no answer (``u``),
    or the reader killed between sending it and printing the answer."""
    sent = {(e.body, e.delivery, e.reader) for e in events if e.kind == "i"}
    told = {(e.body, e.delivery, e.reader) for e in events if e.kind in ("a", "r")}
    return {b for b, _n, _r in sent - told} | {e.body for e in events if e.kind == "u"}


def accounted(events: list[Event]) -> set[bytes]:
    """Bodies acked, or whose ack may have been taken."""
    return {e.body for e in events if e.kind == "a"} | unanswered(events)


def check_share(events: list[Event], stored: set[bytes], dead: set[bytes]) -> tuple[dict, list]:
    """(figures, problems) of a share group's history across every reader
    and every queue. An ack whose outcome is unknown may have been taken:
    its message counts as accounted for, and a later delivery of it is no
    violation (it may not have been)."""
    acks = collections.Counter(e.body for e in events if e.kind == "a")
    acked_at: dict[bytes, int] = {}          # the delivery its first successful ack was of
    for e in events:
        if e.kind == "a":
            acked_at[e.body] = min(acked_at.get(e.body, e.delivery), e.delivery)
    unknown = unanswered(events) - set(acks)
    delivered = [e for e in events if e.kind == "d"]
    top: dict[bytes, int] = collections.defaultdict(int)
    for e in delivered:
        top[e.body] = max(top[e.body], e.delivery)
    after_ack = sorted(b for b, n in acked_at.items() if top[b] > n)
    twice = sorted(b for b, n in acks.items() if n > 1)
    accounted = set(acks) | unknown | dead
    missing = sorted(stored - accounted)
    acked_and_dead = sorted(set(acks) & dead)
    figures = {
        "delivered": len(delivered),
        "acked": sum(acks.values()),
        "redeliveries": sum(1 for e in delivered if e.delivery > 1),
        "acks_refused": sum(1 for e in events if e.kind == "r"),
        "acks_unknown": len(unknown),
        "dead_lettered": len(dead & stored),
        "acked_twice": len(twice),
        "delivered_after_ack": len(after_ack),
        "unaccounted": len(missing),
        "acked_and_dead_lettered": len(acked_and_dead),
        "examples": [b.decode(errors="replace") for b in (twice + after_ack + missing)[:5]],
    }
    problems = []
    if twice:
        problems.append(f"{len(twice)} message(s) acked twice by the share group")
    if after_ack:
        problems.append(f"{len(after_ack)} message(s) delivered again after an ack succeeded")
    if missing:
        problems.append(f"{len(missing)} stored message(s) never acked nor dead-lettered")
    if acked_and_dead:
        problems.append(f"{len(acked_and_dead)} message(s) both acked and dead-lettered")
    return figures, problems
