"""The handlers that write to the log: sends (idempotent retries answered
from the producer state, delayed messages to the schedule topic), messages a
consumer sends back, and the ends of transactions. Each is acked at once or,
under SYNC_FLUSH or SYNC replication, deferred until durable (``None``)."""

from __future__ import annotations

import functools
import time
from typing import Any

from duomq.auth.acl import topic_read
from duomq.broker.core import BrokerCore
from duomq.broker.requests import Answer, Request, hosted, master_only, stored_record, writable
from duomq.common import delay as d
from duomq.common import recall_handle
from duomq.common.errors import (
    BadRequestError,
    InvalidNameError,
    MessageTooLargeError,
    QuotaExceededError,
)
from duomq.common.idempotence import sequence_of
from duomq.common.message import decode_records
from duomq.common.names import DLQ_PREFIX, HALF_TOPIC, RETRY_PREFIX, TIMER_TOPIC, reserved, validate_name
from duomq.common.transaction import TransactionState
from duomq.format import native
from duomq.format import record as rec
from duomq.master.parts import MasterParts
from duomq.proto import pb
from duomq.proto.wire import SendAnswer
from duomq.store.producer_state import OLD
from duomq.timer.indexer import record_sizes

_FLAGS = rec.fields("flags")
_LENGTHS = rec.fields("topic_len", "tags_len", "keys_len", "props_len")


# ------------------------------------------------------------ send
def send(b: BrokerCore, r: Request) -> Answer | None:
    req: pb.SendRequest = r.message
    m = master_only(b)
    if reserved(req.topic):
        raise InvalidNameError(f"topic {req.topic!r} is reserved: the broker writes it itself "
                               f"(a retry goes back with SEND_BACK)")
    queues = hosted(b, req.topic)           # the topic's name checked there
    if not 0 <= req.queue_id < queues:
        raise BadRequestError(f"queue {req.queue_id} of topic {req.topic!r} does not exist "
                              f"(this group hosts queues 0..{queues - 1})")
    if req.count <= 0:
        raise BadRequestError("a send carries at least one record")
    writable(b)
    numbering = _numbering(req)
    if numbering is not None:
        retried, answer = _stored_before(b, m, r, req, numbering)
        if retried:
            return answer
    if req.scheduled:
        resp, end = _put_scheduled(b, m, req, r.user)
    else:
        # its queue entries and bookkeeping after the ack (the answer book's)
        put = b.store.put_batch(req.topic, req.queue_id, bytearray(req.records), req.count,
                                numbering, later=True)
        b.answers.owe(put.rest)
        resp = SendAnswer(b.config.group, put.queue_offset, put.physical_offsets)
        end = put.end_offset
    b.state.appended = True
    resp.epoch = b.state.epoch
    if m.slaves_missing():
        return pb.SLAVE_NOT_AVAILABLE, (
            f"stored, but fewer than min_sync_replicas ({b.config.min_sync_replicas}) "
            f"slaves are in sync to confirm it"), resp
    if m.wait_for_ack(end, r.identity, r.request_id, resp):
        return None
    m.mark_replicas(resp)
    return pb.OK, "", resp


def _numbering(req: pb.SendRequest) -> tuple[int, int, int] | None:
    """``(producer id, sequence, count)`` of an idempotent producer's batch
    (its first record is flagged, ``common/idempotence.py``); None for a
    batch not numbered. Read once: the store observes it as given."""
    data = req.records
    if len(data) < rec.HEADER_SIZE or not _FLAGS.unpack_from(data, 0)[0] & rec.FLAG_SEQUENCED:
        return None
    got = _sequence(data)        # the plain case in C: the same numbers as below, or None
    if got is not None:
        pid, seq, count = got
    else:
        lt, lg, lk, lp = _LENGTHS.unpack_from(data, 0)
        p = rec.HEADER_SIZE + lt + lg + lk
        try:
            pid, seq, count = sequence_of(rec.decode_properties(data[p:p + lp]))
        except ValueError as exc:
            raise BadRequestError(f"an idempotent batch's first record: {exc}") from None
    if count != req.count:
        raise BadRequestError(f"an idempotent batch says it holds {count} records, the send "
                              f"{req.count}")
    return pid, seq, count


def _stored_before(b: BrokerCore, m: MasterParts, r: Request, req: pb.SendRequest,
                   numbering: tuple[int, int, int]) -> tuple[bool, Answer | None]:
    """An idempotent producer's retry of a batch this log holds
    (``store/producer_state.py``): ``(True, its answer)``, the answer as the
    first store's, under the same durability rules (None: deferred until
    they hold), and nothing is stored again. ``(False, None)`` for a new
    batch."""
    pid, seq, _count = numbering
    batch = b.store.producers.lookup(pid, req.topic, req.queue_id, seq)
    if batch is None:
        return False, None
    resp = SendAnswer(b.config.group, -1, epoch=b.state.epoch, duplicate=True)
    end = b.store.commitlog.max_offset          # unknown: wait for everything written so far
    cq = b.store.find_queue(req.topic, req.queue_id)
    if batch is not OLD and cq is not None:
        entries = [cq.entry(q) for q in range(batch.queue_offset,
                                                batch.queue_offset + batch.records)]
        if all(entries):
            resp.queue_offset = batch.queue_offset
            resp.physical_offsets.extend(e[0] for e in entries)
            end = entries[-1][0] + entries[-1][1]
            # the ids are the first store's: of the epoch that stored it
            first = stored_record(b, entries[0][0], b.store.commitlog.max_offset)
            stored = rec.record_epoch(_FLAGS.unpack_from(first, 0)[0])
            if stored != b.state.epoch & rec.EPOCH_MASK:
                resp.stored_epoch = stored
    b.metrics.duplicates_refused += 1
    if m.slaves_missing():
        return True, (pb.SLAVE_NOT_AVAILABLE, (
            f"stored before, but fewer than min_sync_replicas ({b.config.min_sync_replicas}) "
            f"slaves are in sync to confirm it"), resp)
    if m.wait_for_ack(end, r.identity, r.request_id, resp):
        return True, None
    m.mark_replicas(resp)
    return True, (pb.OK, "", resp)


def _put_scheduled(b: BrokerCore, m: MasterParts, req: pb.SendRequest,
                   user: str | None = None) -> tuple[SendAnswer, int]:
    """A batch with delayed messages: each goes to its level's queue of the
    schedule topic (or, when not delayed, to its queue), one write per run
    of records bound for one queue; a transaction's half message to the
    half topic, within its user's quota of open transactions. Everything is
    validated before anything is stored."""
    cfg = b.config
    now = int(time.time() * 1000)
    timers = m.timer_records(req.records, req.count, req.topic, req.queue_id, now)
    if timers is None:
        buf = bytearray(req.records)
        rec.scan_batch(buf, req.topic.encode(), cfg.max_message_bytes, req.count)
        msgs = decode_records(buf, cfg.group)
        decoded = m.timers_batch(msgs, req.queue_id, now)
        if decoded is not None:
            timers = decoded[0], decoded[1], record_sizes(decoded[0])
    if timers is not None:                        # timers only: one write, one C loop,
        data, ats, sizes = timers                 # indexed at once, queued after the ack
        put = b.store.put_batch(TIMER_TOPIC, 0, bytearray(data), len(ats), later=True)
        b.answers.owe(put.rest)
        b.answers.owe_call(functools.partial(m.timers.sent, put.queue_offset,
                                             put.physical_offsets, sizes, ats, req.topic,
                                             put.stored_ms))
        return SendAnswer(cfg.group, -1, put.physical_offsets), put.end_offset
    placed = m.placements(msgs, req.queue_id, now, user)
    halves = sum(1 for topic, _q, _r in placed if topic == HALF_TOPIC)
    if halves and b.guard is not None and user is not None:
        m.transactions.catch_up()                  # the halves sent just before counted
        open_ = m.transactions.book.by_user.get(user, 0)
        limit = b.quota(user, "open_transactions")
        if open_ + halves > limit:
            raise QuotaExceededError(
                f"user {user!r} has {open_} transactions open on this broker, its quota "
                f"open_transactions ({limit}): this one is refused (end some, or an admin "
                f"raises it: duomq auth user update {user} --quota open_transactions=N)")
    for _topic, _qid, record in placed:
        if len(record) > cfg.max_message_bytes:
            raise rec.RecordTooLargeError(
                f"a delayed record is {len(record)} bytes with its schedule properties, "
                f"over max_message_bytes ({cfg.max_message_bytes})")
    resp = SendAnswer(cfg.group, -1)
    puts = b.store.put_records(placed)
    for put in puts:
        resp.physical_offsets.extend(put.physical_offsets)
    return resp, puts[-1].end_offset


# ------------------------------------------------------------ send back, lookups
def send_back(b: BrokerCore, r: Request) -> Answer | None:
    """A consumer failed a message stored here: write it again into the
    group's retry topic (delayed) or dead-letter topic."""
    req: pb.SendBackRequest = r.message
    m = master_only(b)
    validate_name("consumer group", req.consumer_group)
    writable(b)
    view = stored_record(b, req.physical_offset, b.store.commitlog.max_offset)
    msg = decode_records(view, b.config.group)[0]
    _may_send_back(b, r, msg.topic, req.consumer_group)
    b.admit(r.user, "groups", req.consumer_group)      # its topics are made: bounded per user
    topic, qid, record = m.sent_back(msg, req.consumer_group, max(req.max_reconsume_times, 0),
                                     req.delay_level, req.dead_letter)
    m.heard(req.consumer_group)     # its retry and dead-letter topics, from its first failure
    try:
        put = b.store.put_batch(topic, qid, bytearray(record), 1)
    except rec.RecordError as exc:
        raise MessageTooLargeError(f"cannot store the message again: {exc}") from exc
    b.state.appended = True
    where = topic if topic != d.SCHEDULE_TOPIC else RETRY_PREFIX + req.consumer_group
    resp = pb.SendBackResponse(topic=where, physical_offset=put.physical_offsets[0])
    if m.wait_for_ack(put.end_offset, r.identity, r.request_id, resp, pb.SEND_BACK, rewrite=True):
        return None
    return pb.OK, "", resp


def _may_send_back(b: BrokerCore, r: Request, topic: str, group: str) -> None:
    """A send back copies a message a consumer of ``group`` received: one
    of a topic consumers read (not the broker's own, nor another group's
    retry or dead-letter topic), which its user may read in that group."""
    own = (RETRY_PREFIX + group, DLQ_PREFIX + group)
    if topic not in own and reserved(topic):
        raise BadRequestError(f"a send back of group {group!r} names a message of topic "
                              f"{topic!r}, which that group does not consume: nothing was copied")
    b.require(r.user, topic_read(topic, group))


# ------------------------------------------------------------ timers
def recall(b: BrokerCore, r: Request) -> Answer | None:
    """Recall a timer message stored here that has not come due, by the
    handle its send gave (``common/recall_handle``): a recall record in the
    timer topic (replicated: a failover does not bring the timer back),
    acked under the same rules as a send."""
    req: pb.RecallRequest = r.message
    m = master_only(b)
    topic, msg_id, at = recall_handle.parse(req.handle)
    if topic != req.topic:
        raise BadRequestError(f"the recall handle is of topic {topic!r}, not {req.topic!r}: "
                              f"nothing recalled")
    writable(b)
    placed = m.timers.recall(topic, msg_id, at, int(time.time() * 1000))
    put = b.store.put_records([placed])[-1]
    m.timers.recalled(rec.parse_msg_id(msg_id)[1], at)
    b.state.appended = True
    resp = pb.RecallResponse(msg_id=msg_id, deliver_at_ms=at)
    if m.slaves_missing():
        return pb.SLAVE_NOT_AVAILABLE, (
            f"recalled, but fewer than min_sync_replicas ({b.config.min_sync_replicas}) slaves "
            f"are in sync to confirm it"), resp
    if m.wait_for_ack(put.end_offset, r.identity, r.request_id, resp, pb.RECALL):
        return None
    return pb.OK, "", resp


# ------------------------------------------------------------ transactions
def end_transaction(b: BrokerCore, r: Request) -> Answer | None:
    """Commit or roll back a transaction whose half message is stored here
    (``master/transactions.py``); acked under the same rules as a send."""
    req: pb.EndTransactionRequest = r.message
    m = master_only(b)
    writable(b)
    state = _ACTIONS.get(req.action)
    if state is None:
        raise BadRequestError("an end of a transaction is COMMIT or ROLLBACK")
    ended = m.transactions.end(req.half_offset, state, req.producer_group, req.topic,
                               int(time.time() * 1000), b.store.commitlog.max_offset,
                               req.half_epoch if req.HasField("half_epoch") else None)
    resp = pb.EndTransactionResponse(already=ended.already, epoch=b.state.epoch)
    if ended.message is not None:
        resp.topic, resp.queue_id, resp.physical_offset = ended.message
    if not ended.already:
        b.state.appended = True
    # a repeated end (its answer was lost) waits too: for all written so far,
    # which holds the first end, to be as durable as a send
    end = b.store.commitlog.max_offset if ended.already else ended.end_offset
    if m.slaves_missing():
        return pb.SLAVE_NOT_AVAILABLE, (
            f"ended, but fewer than min_sync_replicas ({b.config.min_sync_replicas}) slaves "
            f"are in sync to confirm it"), resp
    if m.wait_for_ack(end, r.identity, r.request_id, resp, pb.END_TRANSACTION):
        return None
    return pb.OK, "", resp


_ACTIONS = {pb.COMMIT: TransactionState.COMMIT, pb.ROLLBACK: TransactionState.ROLLBACK}
LIST_DEFAULT, LIST_MAX = 1000, 10_000     # pending transactions one listing answers


def list_transactions(b: BrokerCore, r: Request) -> Answer:
    req: pb.ListTransactionsRequest = r.message
    m = master_only(b)
    if req.producer_group:
        validate_name("producer group", req.producer_group)
    m.transactions.catch_up()
    most = min(req.max or LIST_DEFAULT, LIST_MAX)
    resp = pb.ListTransactionsResponse(pending=len(m.transactions.book.pending))
    for t in m.transactions.listing(req.producer_group, most, int(time.time() * 1000)):
        resp.transactions.add(**t)
    return pb.OK, "", resp




_sequence: Any = native.declined     # bound by _bind: the C loops' sequence, or declining all


@native.chosen
def _bind(loops: Any) -> None:
    global _sequence
    _sequence = loops.sequence if loops is not None else native.declined
