"""Share groups' state (pure): which messages of each queue a share group
has done with, which are with a consumer until a deadline, and which wait to
be delivered again (RocketMQ 5's POP, Kafka's share partitions).

Per (group, topic, queue) a window ``[start, next)`` of queue offsets: every
offset below ``start`` is done (acked, moved to the dead-letter queue, or
skipped by the group's subscription); ``next`` is the first never handed
out; each offset of the window is either done or *held*: delivered
``count`` times and, while ``inflight``, invisible to the group until
``until`` (ms, the master's wall clock), else visible again from ``until``
(released, or its invisible time ended).

The state changes only by ops, which the master writes to the share log
(an internal topic of the commit log) before it answers: the log is
replicated, flushed and recovered like any other, so a broker that becomes
master, or starts again, rebuilds the same state by replaying it
(``replay``); a slave keeps it current as the log arrives
(``ShareFollower``). The master's side is ``share.service``. Ops are JSON objects about one queue:

  pop      {"op": "pop", "g", "t", "q", "s": start, "p": next before,
            "n": next after, "i": [[offset, count], ...], "d": deadline, "a": now,
            "c": owner (user/client id), "k": receipt key}
  ack      {"op": "ack", "g", "t", "q", "o": [offset, ...]}   (also "dead")
  release  {"op": "release", ..., "o": [...], "d": visible again at}
  renew    {"op": "renew", ..., "o": [...], "d": new deadline}
  forget   {"op": "forget", "g"}                  (the group deleted)

A receipt is good only in the hands that popped it: a pop records its
owner (the user and client id that asked) and a random key its answer
carries, and a change of a held message must name both (another member of
the group, or a guessed ``queue/offset/count``, holds nothing). A pop by a
client of an earlier release (no client id) gets no key: its messages are
its user's. A pop written by an earlier release recorded neither: its
messages take any receipt.

A pop carries the queue's window as it was, so a replay that begins after
the queue's first ops (retention took them) still knows where the group
is: what it cannot know, the messages of that window, is delivered again
rather than lost.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field

from duomq.common.message import decode_records
from duomq.common.names import SHARE_LOG_TOPIC

DONE_OPS = ("ack", "dead")
NEVER = 1 << 62
Key = tuple[str, str, int]          # (group, topic, queue id)


@dataclass(slots=True)
class Held:
    count: int          # deliveries so far
    until: int          # ms: in flight until (inflight), or visible again from
    inflight: bool
    since: int = 0      # ms: its first delivery
    owner: str = ""     # who popped this delivery: "<user>/<client id>" ("": anyone)
    key: int = 0        # the delivery's receipt key (0: none recorded)


@dataclass(slots=True)
class ShareQueue:
    start: int
    next: int
    held: dict[int, Held] = field(default_factory=dict)
    done: set[int] = field(default_factory=set)

    def advance(self) -> None:
        done = self.done
        while self.start < self.next and self.start in done:
            done.discard(self.start)
            self.start += 1

    def due(self, now_ms: int, limit: int) -> list[tuple[int, Held]]:
        """Held messages visible again now, oldest offset first."""
        out = sorted((o, h) for o, h in self.held.items() if h.until <= now_ms)
        return out[:limit]

    def inflight(self, now_ms: int) -> int:
        return sum(1 for h in self.held.values() if h.inflight and h.until > now_ms)


class ReceiptError(Exception):
    """A receipt that no longer holds its message (RECEIPT_EXPIRED)."""


class ShareBook:
    def __init__(self):
        self.queues: dict[Key, ShareQueue] = {}
        self.redeliveries: dict[str, int] = {}     # group -> deliveries past the first
        self.dead: dict[str, int] = {}             # group -> messages moved to its DLQ
        self._turns: dict[tuple[str, str], int] = {}   # (group, topic) -> next first queue
        # (group, topic) -> no held message of theirs is visible again before this
        # (ms; a lower bound, made exact by settle_due): held pops are looked at then
        self._due: dict[tuple[str, str], int] = {}

    def due_by(self, key: tuple[str, str], now_ms: int) -> bool:
        """Whether a held message of ``key`` (group, topic) may be visible
        again by ``now_ms`` (False: certainly none is)."""
        return self._due.get(key, NEVER) <= now_ms

    def settle_due(self, key: tuple[str, str]) -> None:
        """The exact earliest time a held message of ``key`` is visible again."""
        group, topic = key
        earliest = min((h.until for (g, t, _q), q in self.queues.items()
                        if g == group and t == topic for h in q.held.values()), default=NEVER)
        if earliest == NEVER:
            self._due.pop(key, None)
        else:
            self._due[key] = earliest

    def _may_be_due(self, key: Key, at: int) -> None:
        k = (key[0], key[1])
        self._due[k] = min(self._due.get(k, NEVER), at)

    def turn(self, group: str, topic: str, queues: int) -> int:
        """The queue a pop of ``group`` on ``topic`` looks at first (round
        robin, so that one busy queue does not starve the others)."""
        k = (group, topic)
        first = self._turns.get(k, 0) % max(queues, 1)
        self._turns[k] = first + 1
        return first

    # ------------------------------------------------------------ reads
    def queue(self, key: Key) -> ShareQueue | None:
        return self.queues.get(key)

    def groups(self) -> set[str]:
        return {k[0] for k in self.queues}

    def of_group(self, group: str) -> Iterator[tuple[Key, ShareQueue]]:
        return ((k, q) for k, q in self.queues.items() if k[0] == group)

    def held_count(self, group: str) -> int:
        """Messages of ``group`` held (in flight or waiting to be delivered
        again): what its in-flight limit counts."""
        return sum(len(q.held) for _k, q in self.of_group(group))

    def figures(self) -> dict[str, tuple[int, int, int]]:
        """Per group: (messages held, deliveries past the first, messages
        moved to its dead-letter queue)."""
        held: dict[str, int] = {}
        for (group, _t, _q), q in self.queues.items():
            held[group] = held.get(group, 0) + len(q.held)
        return {g: (held.get(g, 0), self.redeliveries.get(g, 0), self.dead.get(g, 0))
                for g in held.keys() | self.redeliveries.keys() | self.dead.keys()}

    def check(self, key: Key, offset: int, count: int, now_ms: int, owner: str = "",
              receipt_key: int = 0) -> Held:
        """The held message a receipt (its delivery ``count`` and
        ``receipt_key``, presented by ``owner``) still holds, else
        ReceiptError saying why."""
        q = self.queues.get(key)
        h = q.held.get(offset) if q is not None else None
        if h is None:
            if q is not None and (offset < q.start or offset in q.done):
                raise ReceiptError(f"message {offset} of queue {key[2]} was acked already "
                                   f"(or moved to the dead-letter queue)")
            raise ReceiptError(f"message {offset} of queue {key[2]} was never delivered to "
                               f"group {key[0]!r}")
        if h.count != count:
            raise ReceiptError(f"message {offset} of queue {key[2]} is in its delivery "
                               f"{h.count}; this receipt is of delivery {count}")
        if (h.owner and owner != h.owner) or (h.key and receipt_key != h.key):
            raise ReceiptError(f"message {offset} of queue {key[2]} is held by another "
                               f"consumer: this receipt is not one it was given")
        if not h.inflight:
            raise ReceiptError(f"message {offset} of queue {key[2]} was released; it is "
                               f"delivered again")
        if h.until <= now_ms:
            raise ReceiptError(f"message {offset} of queue {key[2]}: its invisible time ended "
                               f"{now_ms - h.until} ms ago; it is delivered again")
        return h

    # ------------------------------------------------------------ changes
    def apply(self, op: dict) -> None:
        """Apply one op (the master as it writes it; any broker replaying the
        share log). Ops the master wrote are consistent; an op about a
        queue or offset this book does not hold changes nothing there."""
        kind = op["op"]
        if kind == "forget":                         # the group deleted
            for k in [k for k in self.queues if k[0] == op["g"]]:
                del self.queues[k]
            return
        key = (op["g"], op["t"], op["q"])
        q = self.queues.get(key)
        if kind == "pop":
            if q is None:
                q = self.queues[key] = ShareQueue(op["s"], op.get("p", op["s"]))
                for offset in range(q.start, q.next):    # a replay that began late
                    q.held[offset] = Held(1, 0, False, op.get("a", 0))
                    self._may_be_due(key, 0)
            until, at = op["d"], op.get("a", 0)
            owner, rkey = op.get("c", ""), op.get("k", 0)
            if op["i"]:
                self._may_be_due(key, until)
            for offset, count in op["i"]:
                if count > 1:
                    self.redeliveries[key[0]] = self.redeliveries.get(key[0], 0) + 1
                before = q.held.get(offset)
                q.held[offset] = Held(count, until, True, before.since if before else at,
                                      owner, rkey)
                q.done.discard(offset)
            nxt = op.get("n", q.next)
            for offset in range(q.next, nxt):       # skipped by the subscription
                if offset not in q.held:
                    q.done.add(offset)
            q.next = max(q.next, nxt)
            q.advance()
            return
        if q is None:
            return
        if kind in DONE_OPS:
            for offset in op["o"]:
                if q.held.pop(offset, None) is not None:
                    q.done.add(offset)
                    if kind == "dead":
                        self.dead[key[0]] = self.dead.get(key[0], 0) + 1
            q.advance()
        elif kind == "release":
            for offset in op["o"]:
                h = q.held.get(offset)
                if h is not None:
                    h.inflight, h.until = False, op["d"]
                    self._may_be_due(key, op["d"])
        elif kind == "renew":
            for offset in op["o"]:
                h = q.held.get(offset)
                if h is not None:
                    h.until = op["d"]
                    self._may_be_due(key, op["d"])
        else:
            raise ValueError(f"unknown share op {kind!r}")


def encode_op(op: dict) -> bytes:
    return json.dumps(op, separators=(",", ":")).encode()


def decode_op(body: bytes) -> dict:
    op = json.loads(body)
    if not isinstance(op, dict) or "op" not in op:
        raise ValueError("not a share op")
    return op


def replay(store, book: ShareBook | None = None) -> ShareBook:
    """The book the share log in ``store`` describes (every op its log
    holds, in order)."""
    follower = ShareFollower()
    if book is not None:
        follower.book = book
    return follower.hand_over(store)


class ShareFollower:
    """A slave's copy of the book, kept current as the share log arrives
    (``catch_up`` on the serving thread, a bounded number of ops a turn), so
    that a promotion applies only the tail (``hand_over``) and the failover
    does not wait for a replay of the whole log. A log cut (the broker
    follows a new master) or a demotion starts it afresh (``reset``)."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.book = ShareBook()
        self.applied: int | None = None     # the share log's next queue offset to apply

    def catch_up(self, store, most: int = 4096) -> bool:
        """Apply up to ``most`` ops the log holds beyond what was applied;
        whether it is at the log's end now."""
        cq = store.find_queue(SHARE_LOG_TOPIC, 0)
        if cq is None:
            return True
        offset = cq.min_offset if self.applied is None else max(self.applied, cq.min_offset)
        end, applied = store.commitlog.max_offset, 0
        while applied < most:
            got = store.get_messages(SHARE_LOG_TOPIC, 0, offset, min(1024, most - applied),
                                     8 << 20, end)
            if not got.count:
                if got.next_offset > offset:
                    offset = got.next_offset
                    continue
                self.applied = offset
                return True
            for msg in decode_records(got.records):
                try:
                    self.book.apply(decode_op(msg.body))
                except (ValueError, KeyError, TypeError):
                    pass                           # not an op this version knows
            applied += got.count
            offset = got.next_offset
        self.applied = offset
        return False

    def hand_over(self, store) -> ShareBook:
        """The book at the log's end (the tail applied now); the follower
        starts afresh."""
        while not self.catch_up(store, 1 << 30):
            pass
        book = self.book
        self.reset()
        return book
