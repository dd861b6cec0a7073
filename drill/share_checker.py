"""The drill's checker for share groups (pure): every stored message acked
exactly once by some reader, or in the group's dead-letter queue; none
delivered again after an ack of it succeeded; redeliveries counted.

A stored message is its body and its message id: a body stored twice (a
timer moved again or a transaction committed again by the next master,
each copy recognisable by its ORIGIN_MESSAGE_ID or TRAN_HALF_ID) is two
messages, each acked once (``copies_acked`` counts the bodies); one id
acked twice is the violation."""

from __future__ import annotations

import collections
from typing import NamedTuple


class Event(NamedTuple):
    kind: str        # d: delivered, i: ack sent, a: acked, r: ack refused, u: outcome unknown
    body: bytes
    delivery: int    # the delivery count
    reader: int
    msg_id: str = ""  # the stored record's id ("": not known)


def _key(e: Event) -> tuple[bytes, str]:
    return e.body, e.msg_id


def unanswered(events: list[Event]) -> set[bytes]:
    """Bodies whose ack went out without an outcome: no answer (``u``),
    or the reader killed between sending it and printing the answer."""
    sent = {(e.body, e.msg_id, e.delivery, e.reader) for e in events if e.kind == "i"}
    told = {(e.body, e.msg_id, e.delivery, e.reader) for e in events if e.kind in ("a", "r")}
    return {b for b, _m, _n, _r in sent - told} | {e.body for e in events if e.kind == "u"}


def accounted(events: list[Event]) -> set[bytes]:
    """Bodies acked, or whose ack may have been taken."""
    return {e.body for e in events if e.kind == "a"} | unanswered(events)


def check_share(events: list[Event], stored: set[bytes], dead: set[bytes]) -> tuple[dict, list]:
    """(figures, problems) of a share group's history across every reader
    and every queue. An ack whose outcome is unknown may have been taken:
    its message counts as accounted for, and a later delivery of it is no
    violation (it may not have been)."""
    acks = collections.Counter(_key(e) for e in events if e.kind == "a")
    acked_at: dict[tuple, int] = {}          # the delivery its first successful ack was of
    for e in events:
        if e.kind == "a":
            acked_at[_key(e)] = min(acked_at.get(_key(e), e.delivery), e.delivery)
    acked_bodies = {b for b, _m in acks}
    unknown = unanswered(events) - acked_bodies
    delivered = [e for e in events if e.kind == "d"]
    top: dict[tuple, int] = collections.defaultdict(int)
    for e in delivered:
        top[_key(e)] = max(top[_key(e)], e.delivery)
    after_ack = sorted(b for (b, _m), n in acked_at.items() if top[(b, _m)] > n)
    twice = sorted(b for (b, _m), n in acks.items() if n > 1)
    copies = collections.Counter(b for b, _m in acks)
    accounted = acked_bodies | unknown | dead
    missing = sorted(stored - accounted)
    acked_and_dead = sorted(acked_bodies & dead)
    figures = {
        "delivered": len(delivered),
        "acked": sum(acks.values()),
        "redeliveries": sum(1 for e in delivered if e.delivery > 1),
        "acks_refused": sum(1 for e in events if e.kind == "r"),
        "acks_unknown": len(unknown),
        "dead_lettered": len(dead & stored),
        "acked_twice": len(twice),
        "copies_acked": sum(1 for n in copies.values() if n > 1),
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
