"""Transactional sends (RocketMQ's ``TransactionMQProducer``): a half
message the brokers hold back from consumers, the application's local
transaction, then its end, commit or rollback (``common/transaction.py``).

    def execute(msg, arg):
        db.insert_order(arg)                  # the local transaction
        return TransactionState.COMMIT

    def check(msg):                           # the broker asks about a pending one
        return TransactionState.COMMIT if db.has_order(msg.keys) else \\
            TransactionState.ROLLBACK

    with TransactionProducer(group="orders", checker=check, zookeeper=..., cluster=...) as p:
        result = p.send_in_transaction(Message("Orders", b"..."), execute, order)

``execute`` runs once the half message is stored, with the transaction's
id in ``msg.properties["TRAN_HALF_ID"]``; what it returns (an exception
counts as UNKNOWN) decides the end. As RocketMQ advises, record that id in
the local transaction and let ``checker`` look it up: a half message sent
twice (its first answer lost) then has one id the application knows, and
the other one is rolled back. UNKNOWN leaves the
transaction pending: the broker checks it back later with a producer of the
group (``checker``). An end is retried on another master after a failover
(the half message was replicated with the log), and a repeated end changes
nothing.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from duomq.client.producer.producer import Producer, SendResult, SendStatus
from duomq.client.shape import check_shape
from duomq.common import transaction as tx
from duomq.common.delay import REAL_QID, REAL_TOPIC
from duomq.common.errors import DuomqError, ServiceNotAvailableError, for_status
from duomq.common.message import Message, MessageExt, MessageQueue, decode_records
from duomq.common.transaction import TransactionState
from duomq.proto import codec, pb

log = logging.getLogger(__name__)
END_RETRY_PAUSE_S = 0.1
MAX_QUEUED_CHECKS = 10_000       # check-backs waiting for the checker, at most
Checker = Callable[[MessageExt], TransactionState]
Executor = Callable[[Message, object], TransactionState]
_ACTION = {TransactionState.COMMIT: pb.COMMIT, TransactionState.ROLLBACK: pb.ROLLBACK}
UNCONFIRMED = frozenset({pb.FLUSH_DISK_TIMEOUT, pb.FLUSH_SLAVE_TIMEOUT})


@dataclass(frozen=True)
class TransactionSendResult:
    """The half message's send, the transaction's id (None when the half
    message was not stored), and how the local transaction ended: COMMIT or
    ROLLBACK once the broker recorded that end; UNKNOWN when it was left
    to a check-back (the local transaction said so, raised, or the end could
    not be delivered in time)."""
    send_result: SendResult
    transaction_id: str | None
    local_state: TransactionState
    error: str = ""            # why an end is UNKNOWN, when it is not the application's answer

    @property
    def msg_id(self) -> str:
        return self.send_result.msg_id


class TransactionProducer(Producer):
    def __init__(self, group: str, *old: Any, checker: Checker | None = None,
                 zookeeper: str | None = None, cluster: str | None = None,
                 **producer_settings):
        check_shape("TransactionProducer", group, old)
        self.checker = checker
        # check-backs, answered one at a time off the I/O thread; more than
        # MAX_QUEUED_CHECKS waiting are dropped (the broker asks again later).
        # Made first: a Producer that refuses its settings closes itself, and
        # this close runs then (an AttributeError hid the ConfigError)
        self._checks = ThreadPoolExecutor(1, thread_name_prefix="duomq-tx-check")
        self._queued = threading.Semaphore(MAX_QUEUED_CHECKS)
        self.checks_answered = 0
        super().__init__(group, zookeeper=zookeeper, cluster=cluster, **producer_settings)
        self.remoting.on_push = self._on_push

    def close(self) -> None:
        remoting = getattr(self, "remoting", None)
        if remoting is not None:
            remoting.on_push = None
        self._checks.shutdown(wait=False, cancel_futures=True)
        super().close()

    def send_in_transaction(self, msg: Message, execute: Executor, arg=None, *,
                            sharding_key: str | None = None,
                            queue: MessageQueue | None = None,
                            timeout_ms: int | None = None) -> TransactionSendResult:
        """Store ``msg`` as a half message, run ``execute(msg, arg)``, and end
        the transaction as it says. A half message that was not stored
        (SendResult not ok) runs nothing and is rolled back if stored at all.
        ``sharding_key`` or ``queue`` pick the queue as for ``send`` (an
        ordered topic's): the committed message is appended there at its
        commit, so the queue holds a key's messages in commit order."""
        half = copy.copy(msg)
        half.properties = {**msg.properties, tx.TRANSACTION: "true",
                           tx.PRODUCER_GROUP: self.config.group}
        result = self.send(half, sharding_key=sharding_key, queue=queue, timeout_ms=timeout_ms)
        tid = tx.transaction_id(result.broker_group, result.physical_offsets[0],
                                result.stored_epoch or result.epoch) \
            if result.physical_offsets else None
        if result.status is not SendStatus.SEND_OK:
            # stored without the durability asked for (or not at all): no
            # local transaction; a stored half message is rolled back
            if tid is not None:
                self._end_quietly(tid, msg.topic, TransactionState.ROLLBACK)
            return TransactionSendResult(result, tid, TransactionState.ROLLBACK,
                                         f"the half message was {result.status.value}")
        assert tid is not None
        try:
            mine = copy.copy(msg)               # with its transaction's id, to record
            mine.properties = {**msg.properties, tx.HALF_ID: tid}
            state = execute(mine, arg)
            if not isinstance(state, TransactionState):
                log.error("the local transaction of %s returned %r, not a TransactionState: "
                          "UNKNOWN", tid, state)
                state = TransactionState.UNKNOWN
        except Exception:
            log.exception("the local transaction of %s raised: UNKNOWN, left to a check-back",
                          tid)
            state = TransactionState.UNKNOWN
        if state is TransactionState.UNKNOWN:
            return TransactionSendResult(result, tid, state)
        error = self._end_quietly(tid, msg.topic, state, timeout_ms)
        return TransactionSendResult(result, tid, TransactionState.UNKNOWN if error else state,
                                     error)

    def end_transaction(self, transaction_id: str, topic: str, state: TransactionState, *,
                        from_check: bool = False,
                        timeout_ms: int | None = None) -> pb.EndTransactionResponse:
        """Commit or roll back ``transaction_id`` (a message of ``topic``) on
        its broker group's master, retried there (a new master after a
        failover) until ``timeout_ms``; TransactionEndedError when it ended
        the other way."""
        group, offset, epoch = tx.parse_transaction_id_epoch(transaction_id)
        req = pb.EndTransactionRequest(producer_group=self.config.group, half_offset=offset,
                                       action=_ACTION[state], from_check=from_check, topic=topic)
        if epoch is not None:            # the broker checks the half is of that epoch
            req.half_epoch = epoch
        deadline = time.monotonic() + (timeout_ms or self.config.send_timeout_ms) / 1000
        while True:
            try:
                served = self.route(topic).groups.get(group)
                if served is None:
                    raise DuomqError(f"broker group {group!r} of transaction {transaction_id} "
                                     f"does not serve {topic!r} now")
                status, error, resp = self.remoting.call(
                    served.address, pb.END_TRANSACTION, req,
                    max(0.05, deadline - time.monotonic()))
                if status == pb.OK:
                    return resp
                if status == pb.SLAVE_NOT_AVAILABLE:     # ended on a master alone, as a send
                    log.warning("%s ended on its master alone: %s", transaction_id, error)
                    return resp
                if status in UNCONFIRMED:        # written, not yet as durable as asked:
                    raise ServiceNotAvailableError(error)    # ask again (it is idempotent)
                raise for_status(status, error)
            except DuomqError as exc:
                if not exc.retriable or time.monotonic() + END_RETRY_PAUSE_S >= deadline:
                    raise
                log.info("ending %s: %s; trying again", transaction_id, exc)
                time.sleep(END_RETRY_PAUSE_S)

    # ------------------------------------------------------------ check-backs
    def _on_push(self, address: str, frame: pb.Frame) -> None:
        """A broker's check-back (the I/O thread): queued for the checker."""
        if frame.type != pb.CHECK_TRANSACTION_STATE or not self._queued.acquire(blocking=False):
            return
        try:
            req = codec.decode_request(frame)
            self._checks.submit(self._check, req)
        except Exception as exc:     # a broken push, or shutting down: the broker asks again
            self._queued.release()
            log.warning("check-back from %s dropped: %s", address, exc)

    def _check(self, req: pb.CheckTransactionStateRequest) -> None:
        try:
            if self.checker is None:
                log.warning("the broker checks back transaction %s, and producer group %s has "
                            "no checker", req.transaction_id, self.config.group)
                return
            group, _ = tx.parse_transaction_id(req.transaction_id)
            msg = as_sent(decode_records(req.record, group)[0])
            try:
                state = self.checker(msg)
            except Exception:
                log.exception("the checker raised for %s: UNKNOWN", req.transaction_id)
                state = TransactionState.UNKNOWN
            self.checks_answered += 1
            if isinstance(state, TransactionState) and state is not TransactionState.UNKNOWN:
                self._end_quietly(req.transaction_id, msg.topic, state, from_check=True)
        finally:
            self._queued.release()

    def _end_quietly(self, tid: str, topic: str, state: TransactionState,
                     timeout_ms: int | None = None, from_check: bool = False) -> str:
        """End ``tid``; what went wrong ("" if nothing): a transaction whose
        end did not arrive is checked back later."""
        try:
            self.end_transaction(tid, topic, state, timeout_ms=timeout_ms, from_check=from_check)
            return ""
        except DuomqError as exc:
            log.warning("could not %s %s (left to a check-back): %s", state.value.lower(), tid,
                        exc)
            return f"{type(exc).__name__}: {exc}"


def as_sent(half: MessageExt) -> MessageExt:
    """A half message as its producer sent it: its topic and queue, its own
    properties, and the transaction's id as its message id."""
    props = {k: v for k, v in half.properties.items()
             if k not in (tx.TRANSACTION, REAL_TOPIC, REAL_QID)}
    props[tx.HALF_ID] = half.msg_id
    return dataclasses.replace(half, topic=half.properties.get(REAL_TOPIC, half.topic),
                               queue_id=int(half.properties.get(REAL_QID, half.queue_id)),
                               properties=props)
