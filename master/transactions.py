"""The transaction service (RocketMQ's ``TransactionalMessageService``): on
the master, keeps the book of pending transactions (``tx_book``) current
from the half and op queues, and ends transactions: a commit writes the
half message to its topic as it was sent, and either end writes its op.

It runs on the broker's loop, which owns every write to the store. Its
check points are consumer offsets of ``TRANSACTION_GROUP`` on the half and
op queues, committed only once everything read up to them is visible
(flushed, and held by the in-sync slaves under SYNC replication); they
reach slaves with the replication stream, so a slave that takes over
rebuilds the book from them and resumes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from duomq.common import delay as d
from duomq.common import transaction as tx
from duomq.common.errors import BadRequestError, TransactionEndedError, TransactionNotFoundError
from duomq.common.message import MessageExt, decode_records
from duomq.common.names import HALF_TOPIC, OP_TOPIC
from duomq.common.transaction import TransactionState
from duomq.format import record as rec
from duomq.master import requeue
from duomq.master.tx_book import (
    CHECKED,
    ENDS,
    ROLLED_BACK,
    Half,
    Outcome,
    TransactionBook,
    decode_op,
    encode_op,
)
from duomq.proto import codec, pb

log = logging.getLogger(__name__)
TRANSACTION_GROUP = "%TRANSACTION%"        # its check points live in the offset table
READ_BATCH = 4096                          # queue entries read per catch-up and queue
ENDED_AS = {TransactionState.COMMIT: "committed", TransactionState.ROLLBACK: "rolled back"}
MAX_DUE = 10_000                           # transactions looked at per check round
CHECKS_PER_PRODUCER = 64                   # check-backs one producer gets per round


@dataclass
class Ended:
    """What ending a transaction wrote: the commit's message (to answer
    with), and the end of the log to wait on; ``already``: nothing (it had
    ended this way before)."""
    message: tuple[str, int, int] | None    # (topic, queue id, commit-log offset) committed
    end_offset: int
    already: bool = False


class TransactionService:
    def __init__(self, store, offsets, levels: tuple[int, ...], broker_group: str, counters):
        self.store = store
        self.offsets = offsets
        self.levels = levels
        self.broker_group = broker_group
        self.book = TransactionBook(offsets.fetch(TRANSACTION_GROUP, HALF_TOPIC, 0),
                                    offsets.fetch(TRANSACTION_GROUP, OP_TOPIC, 0))
        self._read_end = 0                 # commit-log end of the last record read
        self._committed = (self.book.half_next, self.book.op_next)
        self.counters = counters           # BrokerMetrics: transaction_checks, ..._discarded

    # ------------------------------------------------------------ reading
    def catch_up(self) -> None:
        """Read the half and op queues to their ends (halves first: a half
        is always in the log before its ops)."""
        self._read(HALF_TOPIC, self.book.half_next, self._half)
        self._read(OP_TOPIC, self.book.op_next, self._op)

    def _read(self, topic: str, start: int, take) -> None:
        cq = self.store.find_queue(topic, 0)
        if cq is None:
            return
        off = max(start, cq.min_offset)
        read = self.store.commitlog.read
        while off < cq.max_offset:
            for i in range(off, min(cq.max_offset, off + READ_BATCH)):
                e = cq.entry(i)
                view = read(e[0], e[1]) if e else None
                if view is None:                 # not all written yet: next time
                    return
                take(i, e[0], view)
                self._read_end = max(self._read_end, e[0] + e[1])
                off = i + 1

    def _half(self, queue_offset: int, phys: int, view) -> None:
        (msg,) = decode_records(view, self.broker_group)
        self.book.add_half(Half(phys, queue_offset, msg.store_timestamp_ms,
                                msg.properties.get(tx.PRODUCER_GROUP, ""),
                                user=msg.properties.get(tx.USER, "")))

    def _op(self, queue_offset: int, phys: int, view) -> None:
        try:
            event, half = decode_op(decode_records(view, self.broker_group)[0].body)
        except ValueError as exc:
            log.error("op record at %d of %s is not an op, skipped: %s", phys, OP_TOPIC, exc)
            self.book.op_next = queue_offset + 1
            return
        self.book.add_op(queue_offset, event, half)

    # ------------------------------------------------------------ ending
    def half_message(self, half_offset: int, visible_end: int) -> MessageExt:
        """The half message at ``half_offset``, or TransactionNotFoundError."""
        view = self.store.read_record(half_offset, visible_end)
        msgs = decode_records(view, self.broker_group) if view is not None else []
        if not msgs or msgs[0].topic != HALF_TOPIC:
            raise TransactionNotFoundError(
                f"no transaction {tx.transaction_id(self.broker_group, half_offset)}: no half "
                f"message starts at that offset of broker group {self.broker_group!r}")
        return msgs[0]

    def end(self, half_offset: int, state: TransactionState, producer_group: str, topic: str,
            now_ms: int, visible_end: int, half_epoch: int | None = None) -> Ended:
        """Commit or roll back the transaction of ``half_offset``; a repeated
        end changes nothing, a contradicting one is refused. ``half_epoch``:
        the epoch its id names; a half stored by another epoch's master is
        another transaction (a failover cut the one named): not found."""
        if state is TransactionState.UNKNOWN:
            raise BadRequestError("a transaction ends with COMMIT or ROLLBACK")
        name = tx.transaction_id(self.broker_group, half_offset)
        self.catch_up()
        outcome = self.book.decide(half_offset, state)
        try:
            msg: MessageExt | None = self.half_message(half_offset, visible_end)
        except TransactionNotFoundError:
            if outcome is not Outcome.ALREADY and outcome is not Outcome.CONFLICT:
                raise
            msg = None                           # ended, and its half since deleted
        if msg is not None and half_epoch is not None and msg.epoch != half_epoch & rec.EPOCH_MASK:
            raise TransactionNotFoundError(
                f"no transaction {tx.transaction_id(self.broker_group, half_offset, half_epoch)}"
                f": offset {half_offset} holds the half message {msg.msg_id}, stored by the "
                f"master of epoch {msg.epoch} (a failover cut the one named): nothing ended")
        if msg is not None and producer_group and (
                msg.properties.get(tx.PRODUCER_GROUP) != producer_group
                or msg.properties.get(d.REAL_TOPIC) != topic):
            raise BadRequestError(f"transaction {name} is producer group "
                                  f"{msg.properties.get(tx.PRODUCER_GROUP)!r}'s, on topic "
                                  f"{msg.properties.get(d.REAL_TOPIC)!r}, not {producer_group!r}'s "
                                  f"on {topic!r}")
        if outcome is Outcome.ALREADY:
            return Ended(None, 0, already=True)
        if outcome is Outcome.CONFLICT:
            raise TransactionEndedError(f"transaction {name} was already "
                                        f"{ENDED_AS[self.book.ended[half_offset]]}: nothing "
                                        f"changed")
        if outcome is Outcome.UNKNOWN or msg is None:   # a half behind the check point
            raise TransactionEndedError(f"transaction {name} ended long ago (its end is no "
                                        f"longer remembered): nothing changed")
        items = []
        if state is TransactionState.COMMIT:
            items.append(requeue.committed(msg, self.levels, now_ms))
        items.append((OP_TOPIC, 0, _op_record(ENDS[state], half_offset, now_ms)))
        puts = self.store.put_records(items)
        self.book.ended_now(half_offset, state)
        committed = None
        if state is TransactionState.COMMIT:
            where, qid, _ = items[0]            # its topic (or the schedule topic)
            committed = (where, qid, puts[0].physical_offsets[0])
        return Ended(committed, puts[-1].end_offset)

    # ------------------------------------------------------------ check-backs
    def check(self, now_ms: int, producers: Callable[[str, str], list[bytes]],
              push: Callable[[bytes, bytes], bool], config) -> int:
        """Check back the transactions pending past ``transaction_timeout_ms``
        (each at most every ``transaction_check_interval_ms``) with a live
        producer of their group allowed to publish to their topic
        (``producers(group, topic)``, connections by which ``push`` reaches
        them), at most ``CHECKS_PER_PRODUCER`` per producer
        per round, so a producer coming back to a backlog is not stormed;
        one checked ``transaction_check_max`` times is rolled back. Each
        check-back is written to the op queue (a new master knows the
        count). Returns the records written."""
        self.catch_up()
        due = self.book.due(now_ms, config.transaction_timeout_ms,
                            config.transaction_check_interval_ms, MAX_DUE)
        ops: list[tuple[str, int, bytes]] = []
        sent: dict[bytes, int] = {}             # connection -> check-backs this round
        gone: set[bytes] = set()                # connections that took nothing
        for half in due:
            name = tx.transaction_id(self.broker_group, half.offset)
            if half.checks >= config.transaction_check_max:
                log.error("transaction %s of producer group %s rolled back: no end after %d "
                          "check-backs", name, half.producer_group, half.checks)
                ops.append((OP_TOPIC, 0, _op_record(ROLLED_BACK, half.offset, now_ms)))
                self.book.ended_now(half.offset, TransactionState.ROLLBACK)
                self.counters.transactions_discarded += 1
                continue
            view = self.store.read_record(half.offset)
            if view is None:
                continue
            stored = decode_records(view, self.broker_group)[0]
            name, topic = stored.msg_id, stored.properties.get(d.REAL_TOPIC, "")
            live = sorted((c for c in producers(half.producer_group, topic)
                           if sent.get(c, 0) < CHECKS_PER_PRODUCER and c not in gone),
                          key=lambda c: sent.get(c, 0))
            if not live:                        # nobody to ask now: not counted
                continue
            request = codec.encode_request(0, pb.CHECK_TRANSACTION_STATE,
                                           pb.CheckTransactionStateRequest(
                                               transaction_id=name, topic=topic,
                                               record=bytes(view), checks=half.checks + 1))
            for conn in live:                   # the least asked first; a gone one skipped
                if push(conn, request):
                    sent[conn] = sent.get(conn, 0) + 1
                    break
                gone.add(conn)
            else:
                continue
            half.last_check_ms = now_ms
            ops.append((OP_TOPIC, 0, _op_record(CHECKED, half.offset, now_ms)))
            self.counters.transaction_checks += 1
        if ops:
            self.store.put_records(ops)
        return len(ops)

    def listing(self, producer_group: str, most: int, now_ms: int) -> list[dict]:
        """Pending transactions, oldest first (``duomq tx list``)."""
        out = []
        for half in self.book.pending.values():
            if producer_group and half.producer_group != producer_group:
                continue
            view = self.store.read_record(half.offset)
            msg = decode_records(view, self.broker_group)[0] if view is not None else None
            out.append({"transaction_id": msg.msg_id if msg else
                        tx.transaction_id(self.broker_group, half.offset),
                        "producer_group": half.producer_group,
                        "topic": msg.properties.get(d.REAL_TOPIC, "") if msg else "",
                        "keys": msg.keys if msg else "", "age_ms": now_ms - half.stored_ms,
                        "checks": half.checks})
            if len(out) >= most:
                break
        return out

    # ------------------------------------------------------------ progress
    def commit_progress(self, visible_end: int) -> None:
        """Commit the check points once all that was read is visible."""
        if visible_end < self._read_end:
            return
        points = self.book.check_points()
        if points != self._committed:
            self.offsets.commit(TRANSACTION_GROUP, HALF_TOPIC, 0, points[0])
            self.offsets.commit(TRANSACTION_GROUP, OP_TOPIC, 0, points[1])
            self._committed = points


def _op_record(event: bytes, half_offset: int, now_ms: int) -> bytes:
    return rec.encode_record(OP_TOPIC.encode(), b"", b"", b"", encode_op(event, half_offset),
                             now_ms, rec.NO_HOST, 0)
