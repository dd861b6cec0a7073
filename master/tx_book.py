"""The transactions a master has pending, and how the others ended (pure:
no store, no clock of its own).

The broker keeps two internal queues (``common/transaction.py``): the half
queue (``RMQ_SYS_TRANS_HALF_TOPIC``/0), one entry per half message, and the
op queue (``RMQ_SYS_TRANS_OP_HALF_TOPIC``/0), one record per event of a
transaction: committed, rolled back, or checked back once more. Both are
in the commit log, so a slave that takes over rebuilds this book by reading
them from the check points the old master committed (``advance``), and
resumes the check-backs where they were.

A transaction is named by its half message's commit-log offset. An op
record's body is ``OP`` below: the event and that offset.
"""

from __future__ import annotations

import enum
import struct
from collections import OrderedDict
from dataclasses import dataclass

from duomq.common.transaction import TransactionState

OP = struct.Struct(">cq")            # event, the half message's commit-log offset
COMMITTED, ROLLED_BACK, CHECKED = b"C", b"R", b"K"
ENDS = {TransactionState.COMMIT: COMMITTED, TransactionState.ROLLBACK: ROLLED_BACK}
ENDED_BY = {v: k for k, v in ENDS.items()}
MAX_ENDED = 100_000                  # ends remembered past the check point (repeated ends)


def encode_op(event: bytes, half_offset: int) -> bytes:
    return OP.pack(event, half_offset)


def decode_op(body: bytes) -> tuple[bytes, int]:
    """``(event, half offset)``; ValueError for a body that is not an op."""
    if len(body) != OP.size:
        raise ValueError(f"an op record's body is {OP.size} bytes, got {len(body)}")
    event, half = OP.unpack(body)
    if event not in (COMMITTED, ROLLED_BACK, CHECKED) or half < 0:
        raise ValueError(f"not an op: {body!r}")
    return event, half


class Outcome(enum.Enum):
    """What an end of a transaction does."""
    WRITE = "write"          # pending: write its end (and, for a commit, the message)
    ALREADY = "already"      # it ended this way before: nothing to write, answer OK
    CONFLICT = "conflict"    # it ended the other way: refused, nothing changes
    UNKNOWN = "unknown"      # no such pending transaction here


@dataclass
class Half:
    offset: int               # commit-log offset: the transaction's name
    queue_offset: int         # in the half queue
    stored_ms: int
    producer_group: str
    checks: int = 0           # check-backs so far
    last_check_ms: int = 0
    user: str = ""            # the user that sent it (a secured broker's), for its quota


class TransactionBook:
    def __init__(self, half_start: int, op_start: int):
        self.pending: dict[int, Half] = {}       # by offset, in half-queue order
        self.by_user: dict[str, int] = {}        # user -> its transactions pending
        self.ended: OrderedDict[int, TransactionState] = OrderedDict()
        self.half_next = half_start              # next half-queue offset to read
        self.op_next = op_start                  # next op-queue offset to read
        self.last_half = -1                      # offset of the last half read
        self._op_halves: list[tuple[int, int]] = []   # (op queue offset, half offset) read
        self._early: dict[int, list[bytes]] = {}  # ops about halves not read yet

    # ------------------------------------------------------------ reading
    def add_half(self, half: Half) -> None:
        """The next entry of the half queue (``half.queue_offset == half_next``)."""
        self.half_next = half.queue_offset + 1
        self.last_half = half.offset
        if half.offset in self.ended:
            return
        self.pending[half.offset] = half
        if half.user:
            self.by_user[half.user] = self.by_user.get(half.user, 0) + 1
        for event in self._early.pop(half.offset, ()):
            self._apply(event, half.offset)

    def add_op(self, op_queue_offset: int, event: bytes, half_offset: int) -> None:
        """The next record of the op queue."""
        self.op_next = op_queue_offset + 1
        if self.pending or half_offset > self.last_half:    # may matter to a new master
            self._op_halves.append((op_queue_offset, half_offset))
        if half_offset in self.pending or half_offset in self.ended:
            self._apply(event, half_offset)
        elif half_offset > self.last_half:      # its half is not read yet
            self._early.setdefault(half_offset, []).append(event)
        # else: about a half that ended before this book's check point

    def _apply(self, event: bytes, half_offset: int) -> None:
        half = self.pending.get(half_offset)
        if event == CHECKED:
            if half is not None:
                half.checks += 1
            return
        if half is not None:
            self._drop(half_offset)
        self._end(half_offset, ENDED_BY[event])

    def _drop(self, half_offset: int) -> None:
        half = self.pending.pop(half_offset, None)
        if half is not None and half.user:
            left = self.by_user.get(half.user, 0) - 1
            if left > 0:
                self.by_user[half.user] = left
            else:
                self.by_user.pop(half.user, None)

    def _end(self, half_offset: int, state: TransactionState) -> None:
        self.ended[half_offset] = state
        self.ended.move_to_end(half_offset)
        while len(self.ended) > MAX_ENDED:
            self.ended.popitem(last=False)

    # ------------------------------------------------------------ deciding
    def decide(self, half_offset: int, state: TransactionState) -> Outcome:
        """What ending ``half_offset`` with ``state`` (COMMIT or ROLLBACK) does."""
        done = self.ended.get(half_offset)
        if done is not None:
            return Outcome.ALREADY if done is state else Outcome.CONFLICT
        if half_offset in self.pending:
            return Outcome.WRITE
        return Outcome.UNKNOWN

    def ended_now(self, half_offset: int, state: TransactionState) -> None:
        """The broker wrote the end of ``half_offset``: the book knows it
        at once (its op record is read again later, and changes nothing)."""
        self._drop(half_offset)
        self._end(half_offset, state)

    def due(self, now_ms: int, timeout_ms: int, interval_ms: int, limit: int) -> list[Half]:
        """Pending transactions to check back now: older than ``timeout_ms``
        and not checked in the last ``interval_ms``; at most ``limit``,
        oldest first."""
        out = []
        for half in self.pending.values():
            if now_ms - half.stored_ms < timeout_ms:
                break                            # the rest are younger
            if now_ms - half.last_check_ms >= interval_ms:
                out.append(half)
                if len(out) >= limit:
                    break
        return out

    # ------------------------------------------------------------ progress
    def check_points(self) -> tuple[int, int]:
        """``(half queue offset, op queue offset)`` a new master may read
        from and rebuild this book: the first half still pending (or the
        next one to read), and the first op not about an earlier, ended
        half."""
        first = next(iter(self.pending.values()), None)    # half-queue order
        half_point, boundary = (first.queue_offset, first.offset) if first is not None else \
            (self.half_next, self.last_half + 1)
        op_point = next((o for o, h in self._op_halves if h >= boundary), self.op_next)
        # what lies before the op point is about halves that ended before the boundary
        self._op_halves = [(o, h) for o, h in self._op_halves if o >= op_point]
        return half_point, op_point
