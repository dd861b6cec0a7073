"""One handler per request type: ``handler(b, request)`` over the broker's
core (``core.BrokerCore``) and the decoded ``Request``. A handler returns
``(status, error, response_message)`` for an answer (OK, or an outcome that
carries a response: SLAVE_NOT_AVAILABLE, NO_MATCHED_MESSAGE, ...), or
``None`` when the answer is deferred (a send waiting for its flush, a held
pull). A request that cannot be served raises a ``DuomqError`` (or a
``RecordError``); the dispatcher answers its status (``errors.answer_for``).
Handlers never touch a socket; the table at the end is what the dispatcher
serves."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NamedTuple

from duomq.broker.core import BrokerCore
from duomq.broker.state import MASTER
from duomq.common import delay as d
from duomq.common import subscription
from duomq.common.errors import (
    BadRequestError,
    MessageTooLargeError,
    NotMasterError,
    ServiceNotAvailableError,
    TopicNotExistError,
)
from duomq.common.idempotence import sequence_of
from duomq.common.message import PullStatus, decode_records, lookup_key
from duomq.common.names import RETRY_PREFIX, validate_name
from duomq.common.transaction import TransactionState
from duomq.format import record as rec
from duomq.master import requeue
from duomq.master.health import readiness
from duomq.master.pull_hold import HeldPull
from duomq.master.read_advice import ADVICE_MIN_BEHIND, master_says_go_to_slave, slave_says_go_back
from duomq.proto import pb
from duomq.store.producer_state import OLD
from duomq.store.residency import window_residency

_FLAGS = rec.fields("flags")
_LENGTHS = rec.fields("topic_len", "tags_len", "keys_len", "props_len")
QUERY_DEFAULT_NUM = 32        # messages a lookup by key returns unless asked (RocketMQ's)
QUERY_MAX_NUM = 64            # ... and at most
MAX_CLIENT_ID_CHARS = 255     # a client id (ours: host@pid@uuid8)
MAX_GROUPS_PER_CLIENT = 1024  # producer and consumer groups one heartbeat names
MAX_CLIENTS = 100_000         # clients one broker tracks (forgotten after 120 s of silence)


class Request(NamedTuple):
    identity: bytes           # the client's ROUTER identity
    request_id: int
    type: int
    message: Any              # the decoded protobuf request


Answer = tuple[int, str, Any]
Handler = Callable[[BrokerCore, Request], Answer | None]


# ------------------------------------------------------------ checks
def _master_only(b: BrokerCore) -> None:
    if b.state.role != MASTER:
        raise NotMasterError(b.not_writable_reason())


def _writable(b: BrokerCore) -> None:
    if not b.writable():
        raise ServiceNotAvailableError(b.not_writable_reason())


def _hosted(b: BrokerCore, topic: str) -> int:
    """The number of queues this group hosts of ``topic``."""
    validate_name("topic", topic, allow_system=True)
    queues = b.hosted_queues(topic)
    if queues is None:
        raise TopicNotExistError(f"topic {topic!r} is not hosted by broker group "
                                 f"{b.config.group!r}")
    return queues


# ------------------------------------------------------------ send
def send(b: BrokerCore, r: Request) -> Answer | None:
    req: pb.SendRequest = r.message
    _master_only(b)
    validate_name("topic", req.topic, allow_system=True)
    queues = _hosted(b, req.topic)
    if not 0 <= req.queue_id < queues:
        raise BadRequestError(f"queue {req.queue_id} of topic {req.topic!r} does not exist "
                              f"(this group hosts queues 0..{queues - 1})")
    if req.count <= 0:
        raise BadRequestError("a send carries at least one record")
    _writable(b)
    retried, answer = _stored_before(b, r, req)
    if retried:
        return answer
    if req.scheduled:
        resp, end = _put_scheduled(b, req)
    else:
        put = b.store.put_batch(req.topic, req.queue_id, bytearray(req.records), req.count)
        resp = pb.SendResponse(queue_offset=put.queue_offset, broker_group=b.config.group)
        resp.physical_offsets.extend(put.physical_offsets)
        end = put.end_offset
    b.state.appended = True
    resp.epoch = b.state.epoch
    if b.sync_replication and not b.slaves_available():
        return pb.SLAVE_NOT_AVAILABLE, (
            f"stored, but fewer than min_sync_replicas ({b.config.min_sync_replicas}) "
            f"slaves are in sync to confirm it"), resp
    if b.ack_waiter(end, r.identity, r.request_id, resp):
        return None
    b.mark_replicas(resp)
    return pb.OK, "", resp


def _stored_before(b: BrokerCore, r: Request, req: pb.SendRequest
                   ) -> tuple[bool, Answer | None]:
    """An idempotent producer's retry of a batch this log holds
    (``store/producer_state.py``): ``(True, its answer)``, the answer as the
    first store's, under the same durability rules (None: deferred until
    they hold), and nothing is stored again. ``(False, None)`` for a new
    batch, or one not numbered."""
    data = req.records
    if len(data) < rec.HEADER_SIZE or not _FLAGS.unpack_from(data, 0)[0] & rec.FLAG_SEQUENCED:
        return False, None
    lt, lg, lk, lp = _LENGTHS.unpack_from(data, 0)
    p = rec.HEADER_SIZE + lt + lg + lk
    try:
        pid, seq, count = sequence_of(rec.decode_properties(data[p:p + lp]))
    except ValueError as exc:
        raise BadRequestError(f"an idempotent batch's first record: {exc}") from None
    if count != req.count:
        raise BadRequestError(f"an idempotent batch says it holds {count} records, the send "
                              f"{req.count}")
    batch = b.store.producers.lookup(pid, req.topic, req.queue_id, seq)
    if batch is None:
        return False, None
    resp = pb.SendResponse(broker_group=b.config.group, queue_offset=-1, duplicate=True,
                           epoch=b.state.epoch)
    end = b.store.commitlog.max_offset          # unknown: wait for everything written so far
    cq = b.store.find_queue(req.topic, req.queue_id)
    if batch is not OLD and cq is not None:
        entries = [cq.entry(q) for q in range(batch.queue_offset,
                                                batch.queue_offset + batch.records)]
        if all(entries):
            resp.queue_offset = batch.queue_offset
            resp.physical_offsets.extend(e[0] for e in entries)
            end = entries[-1][0] + entries[-1][1]
    b.metrics.duplicates_refused += 1
    if b.sync_replication and not b.slaves_available():
        return True, (pb.SLAVE_NOT_AVAILABLE, (
            f"stored before, but fewer than min_sync_replicas ({b.config.min_sync_replicas}) "
            f"slaves are in sync to confirm it"), resp)
    if b.ack_waiter(end, r.identity, r.request_id, resp):
        return True, None
    b.mark_replicas(resp)
    return True, (pb.OK, "", resp)


def _put_scheduled(b: BrokerCore, req: pb.SendRequest) -> tuple[pb.SendResponse, int]:
    """A batch with delayed messages: each goes to its level's queue of the
    schedule topic (or, when not delayed, to its queue), one write per run
    of records bound for one queue. Everything is validated before anything
    is stored."""
    cfg = b.config
    buf = bytearray(req.records)
    rec.scan_batch(buf, req.topic.encode(), cfg.max_message_bytes, req.count)
    now = int(time.time() * 1000)
    placed = [requeue.schedule(m, req.queue_id, b.delay_levels, now)
              for m in decode_records(buf, cfg.group)]
    for _topic, _qid, record in placed:
        if len(record) > cfg.max_message_bytes:
            raise rec.RecordTooLargeError(
                f"a delayed record is {len(record)} bytes with its schedule properties, "
                f"over max_message_bytes ({cfg.max_message_bytes})")
    resp = pb.SendResponse(broker_group=cfg.group, queue_offset=-1)
    puts = b.store.put_records(placed)
    for put in puts:
        resp.physical_offsets.extend(put.physical_offsets)
    return resp, puts[-1].end_offset


# ------------------------------------------------------------ pull
def pull(b: BrokerCore, r: Request) -> Answer | None:
    return _pull(b, r, held=False)


def pull_held(b: BrokerCore, r: Request) -> Answer | None:
    """A held pull answered now: what it finds, or NO_NEW_MESSAGE."""
    return _pull(b, r, held=True)


def _pull(b: BrokerCore, r: Request, held: bool) -> Answer | None:
    req: pb.PullRequest = r.message
    cfg, store = b.config, b.store
    cq = store.find_queue(req.topic, req.queue_id)
    if cq is None:
        _hosted(b, req.topic)
    if req.queue_offset < 0:
        raise BadRequestError("queue_offset must be >= 0")
    lag, refusal = _replica_lag(b, req.max_replica_lag_ms)
    if refusal is not None:
        return refusal
    max_n = min(req.max_messages or cfg.max_pull_messages, cfg.max_pull_messages)
    max_b = min(req.max_bytes or cfg.max_pull_bytes, cfg.max_pull_bytes)
    sub = subscription.parse(req.subscription)
    advice = _advice(b, cq, req.queue_offset) if cq is not None else None
    got = store.get_messages(req.topic, req.queue_id, req.queue_offset, max_n, max_b,
                             b.state.visible_offset, None if sub.everything else sub.codes)
    if got.count:
        resp = pb.PullResponse(count=got.count, records=got.records,
                               next_offset=got.next_offset, min_offset=got.min_offset,
                               max_offset=got.max_offset)
        if advice is not None:
            resp.suggest_broker_id = advice
            resp.advice_ttl_ms = cfg.read_advice_ttl_ms
            b.state.redirects += 1
        return pb.OK, "", _with_lag(resp, lag)
    if got.status is PullStatus.NO_MATCHED_MESSAGE:   # pulled again from next_offset
        return got.status.wire, "", _with_lag(pb.PullResponse(
            next_offset=got.next_offset, min_offset=got.min_offset, max_offset=got.max_offset), lag)
    if got.status is PullStatus.OFFSET_ILLEGAL:
        return got.status.wire, (f"offset {req.queue_offset} is outside "
                                 f"[{got.min_offset}, {got.max_offset}]"), \
            _with_lag(pb.PullResponse(next_offset=got.next_offset, min_offset=got.min_offset,
                                      max_offset=got.max_offset), lag)
    wait_ms = min(req.max_wait_ms, cfg.long_polling_timeout_ms)
    if wait_ms > 0 and not held and b.pull_hold.hold(
            req.topic, req.queue_id,
            HeldPull(r.identity, r.request_id, req, time.monotonic() + wait_ms / 1000,
                     time.monotonic())):
        return None
    return PullStatus.NO_NEW_MESSAGE.wire, "", _with_lag(pb.PullResponse(
        next_offset=req.queue_offset, min_offset=got.min_offset, max_offset=got.max_offset), lag)


def _replica_lag(b: BrokerCore, bound_ms: int) -> tuple[int | None, Answer | None]:
    """A slave's lag behind its master (None on a master), and the answer
    REPLICA_LAGGING, naming the lag, when the pull's bound is exceeded."""
    client = b.ha_client
    if client is None or b.state.role == MASTER:
        return None, None
    lag = client.lag_ms()
    if bound_ms > 0 and (lag < 0 or lag > bound_ms):
        cfg = b.config
        how = "has not caught up with its master since it started" if lag < 0 else \
            f"is {lag} ms behind its master"
        return lag, (pb.REPLICA_LAGGING,
                     f"slave {cfg.group}/{cfg.broker_id} {how} (the reader's max_replica_lag_ms "
                     f"is {bound_ms}); nothing was read", pb.PullResponse(replica_lag_ms=lag))
    return lag, None


def _with_lag(resp: pb.PullResponse, lag: int | None) -> pb.PullResponse:
    if lag is not None:
        resp.replica_lag_ms = lag
    return resp


def _advice(b: BrokerCore, cq, queue_offset: int) -> int | None:
    """Read advice for a pull at ``queue_offset`` (decided before the read,
    which would warm the pages it probes): a cold or deep backlog goes to an
    in-sync slave; a slave sends a reader that caught up back to the master."""
    cfg = b.config
    entry = cq.entry(queue_offset)
    if entry is None:
        return None
    phys = entry[0]
    if b.state.role == MASTER:
        behind = b.store.commitlog.max_offset - phys
        if b.ha is None or behind < ADVICE_MIN_BEHIND:
            return None
        slaves = b.ha.in_sync_ids()
        if not slaves:
            return None
        resident = window_residency(b.store.commitlog.mfq, phys, behind)
        if master_says_go_to_slave(behind, b.total_memory, cfg.access_in_memory_max_ratio,
                                   resident, True):
            return min(slaves)
    elif b.ha_client is not None:
        master_id = b.master_id()
        lag = max(0, b.ha_client.master_max - phys)
        if master_id is not None and slave_says_go_back(lag, b.total_memory,
                                                        cfg.slave_read_back_ratio, True):
            return master_id
    return None


# ------------------------------------------------------------ offsets
def query_offset(b: BrokerCore, r: Request) -> Answer:
    """The min, max or by-time offset of one queue, or of each of
    ``queue_ids`` (a consumer taking many queues of a topic at once)."""
    req: pb.QueryOffsetRequest = r.message
    _lag, refusal = _replica_lag(b, req.max_replica_lag_ms)
    if refusal is not None:         # a stale slave's offsets would plan a stale read
        return refusal[0], refusal[1], pb.QueryOffsetResponse()
    if req.query not in (pb.MIN_OFFSET, pb.MAX_OFFSET, pb.BY_TIME):
        raise BadRequestError(f"unknown offset query {req.query}")
    if not req.queue_ids:
        return pb.OK, "", pb.QueryOffsetResponse(offset=_queue_offset(b, req, req.queue_id))
    queues = _hosted(b, req.topic)
    if len(req.queue_ids) > queues:
        raise BadRequestError(f"{len(req.queue_ids)} queues asked of topic {req.topic!r}, "
                              f"which has {queues} on this group")
    return pb.OK, "", pb.QueryOffsetResponse(
        offsets=[_queue_offset(b, req, q) for q in req.queue_ids])


def _queue_offset(b: BrokerCore, req: pb.QueryOffsetRequest, queue_id: int) -> int:
    store, visible = b.store, b.state.visible_offset
    cq = store.find_queue(req.topic, queue_id)
    if cq is None:
        _hosted(b, req.topic)
        return 0
    if req.query == pb.MIN_OFFSET:
        return cq.min_offset
    if req.query == pb.MAX_OFFSET:
        return store.visible_max_offset(cq, visible)
    return min(store.offset_by_time(req.topic, queue_id, req.timestamp_ms),
               store.visible_max_offset(cq, visible))


def commit_offset(b: BrokerCore, r: Request) -> Answer:
    req: pb.CommitOffsetRequest = r.message
    _master_only(b)                # offsets live on the master; slaves only copy them
    group = validate_name("consumer group", req.consumer_group, allow_system=True)
    for q in req.offsets:          # only queues this group hosts: the table stays bounded
        queues = _hosted(b, q.topic)
        if not 0 <= q.queue_id < queues:
            raise BadRequestError(f"queue {q.queue_id} of topic {q.topic!r} does not exist "
                                  f"(this group hosts queues 0..{queues - 1})")
        if q.offset < 0:
            raise BadRequestError(f"offset {q.offset} for {q.topic}#{q.queue_id} is negative")
    if not b.offsets.has_group(group) and b.offsets.groups() >= b.config.max_consumer_groups:
        raise BadRequestError(f"broker group {b.config.group!r} already keeps offsets of "
                              f"max_consumer_groups ({b.config.max_consumer_groups}) consumer "
                              f"groups: {group!r} is refused")
    for q in req.offsets:
        b.offsets.commit(group, q.topic, q.queue_id, q.offset)
    return pb.OK, "", pb.CommitOffsetResponse()


def fetch_offset(b: BrokerCore, r: Request) -> Answer:
    req: pb.FetchOffsetRequest = r.message
    resp = pb.FetchOffsetResponse()
    for q in req.queues:
        resp.offsets.add(topic=q.topic, queue_id=q.queue_id,
                         offset=b.offsets.fetch(req.consumer_group, q.topic, q.queue_id))
    return pb.OK, "", resp


# ------------------------------------------------------------ send back, lookups
def send_back(b: BrokerCore, r: Request) -> Answer | None:
    """A consumer failed a message stored here: write it again into the
    group's retry topic (delayed) or dead-letter topic."""
    req: pb.SendBackRequest = r.message
    _master_only(b)
    validate_name("consumer group", req.consumer_group)
    _writable(b)
    view = _record(b, req.physical_offset, b.store.commitlog.max_offset)
    msg = decode_records(view, b.config.group)[0]
    topic, qid, record = requeue.send_back(
        msg, req.consumer_group, b.delay_levels, max(req.max_reconsume_times, 0),
        req.delay_level, req.dead_letter)
    try:
        put = b.store.put_batch(topic, qid, bytearray(record), 1)
    except rec.RecordError as exc:
        raise MessageTooLargeError(f"cannot store the message again: {exc}") from exc
    b.state.appended = True
    where = topic if topic != d.SCHEDULE_TOPIC else RETRY_PREFIX + req.consumer_group
    resp = pb.SendBackResponse(topic=where, physical_offset=put.physical_offsets[0])
    if b.ack_waiter(put.end_offset, r.identity, r.request_id, resp, pb.SEND_BACK):
        return None
    return pb.OK, "", resp


# ------------------------------------------------------------ transactions
def end_transaction(b: BrokerCore, r: Request) -> Answer | None:
    """Commit or roll back a transaction whose half message is stored here
    (``master/transactions.py``); acked under the same rules as a send."""
    req: pb.EndTransactionRequest = r.message
    _master_only(b)
    _writable(b)
    if b.transactions is None:
        raise ServiceNotAvailableError("this master is still taking over")
    state = _ACTIONS.get(req.action)
    if state is None:
        raise BadRequestError("an end of a transaction is COMMIT or ROLLBACK")
    ended = b.transactions.end(req.half_offset, state, req.producer_group, req.topic,
                               int(time.time() * 1000), b.store.commitlog.max_offset)
    resp = pb.EndTransactionResponse(already=ended.already, epoch=b.state.epoch)
    if ended.message is not None:
        resp.topic, resp.queue_id, resp.physical_offset = ended.message
    if not ended.already:
        b.state.appended = True
    # a repeated end (its answer was lost) waits too: for all written so far,
    # which holds the first end, to be as durable as a send
    end = b.store.commitlog.max_offset if ended.already else ended.end_offset
    if b.sync_replication and not b.slaves_available():
        return pb.SLAVE_NOT_AVAILABLE, (
            f"ended, but fewer than min_sync_replicas ({b.config.min_sync_replicas}) slaves "
            f"are in sync to confirm it"), resp
    if b.ack_waiter(end, r.identity, r.request_id, resp, pb.END_TRANSACTION):
        return None
    return pb.OK, "", resp


_ACTIONS = {pb.COMMIT: TransactionState.COMMIT, pb.ROLLBACK: TransactionState.ROLLBACK}
LIST_DEFAULT, LIST_MAX = 1000, 10_000     # pending transactions one listing answers


def list_transactions(b: BrokerCore, r: Request) -> Answer:
    req: pb.ListTransactionsRequest = r.message
    _master_only(b)
    if b.transactions is None:
        raise ServiceNotAvailableError("this master is still taking over")
    if req.producer_group:
        validate_name("producer group", req.producer_group)
    b.transactions.catch_up()
    most = min(req.max or LIST_DEFAULT, LIST_MAX)
    resp = pb.ListTransactionsResponse(pending=len(b.transactions.book.pending))
    for t in b.transactions.listing(req.producer_group, most, int(time.time() * 1000)):
        resp.transactions.add(**t)
    return pb.OK, "", resp


def _record(b: BrokerCore, physical_offset: int, visible_end: int) -> memoryview:
    view = b.store.read_record(physical_offset, visible_end)
    if view is None:
        raise BadRequestError(f"no message is stored at offset {physical_offset} of broker "
                              f"group {b.config.group!r}")
    return view


def get_message(b: BrokerCore, r: Request) -> Answer:
    req: pb.GetMessageRequest = r.message
    view = _record(b, req.physical_offset, b.state.visible_offset)
    return pb.OK, "", pb.GetMessageResponse(record=bytes(view))


def query_by_key(b: BrokerCore, r: Request) -> Answer:
    req: pb.QueryByKeyRequest = r.message
    validate_name("topic", req.topic, allow_system=True)
    lookup_key(req.key)
    if req.max_num < 0 or req.begin_timestamp_ms < 0 or req.end_timestamp_ms < 0:
        raise BadRequestError("max_num and the time range must not be negative")
    end = req.end_timestamp_ms or int(time.time() * 1000) + 1000
    max_num = min(req.max_num or QUERY_DEFAULT_NUM, QUERY_MAX_NUM)
    found = b.store.query_by_key(req.topic, req.key, req.begin_timestamp_ms, end, max_num,
                                 b.config.max_pull_bytes, b.state.visible_offset)
    return pb.OK, "", pb.QueryByKeyResponse(count=len(found), records=b"".join(found))


# ------------------------------------------------------------ queue locks
def lock_queues(b: BrokerCore, r: Request) -> Answer:
    req: pb.LockQueuesRequest = r.message
    _master_only(b)                # locks live on the master
    _check_lock_request(b, req)
    got = b.queue_locks.lock(req.consumer_group, req.client_id,
                             [(q.topic, q.queue_id) for q in req.queues], time.monotonic())
    resp = pb.LockQueuesResponse()
    for topic, qid in got:
        resp.locked.add(topic=topic, queue_id=qid)
    return pb.OK, "", resp


def unlock_queues(b: BrokerCore, r: Request) -> Answer:
    req: pb.LockQueuesRequest = r.message
    _master_only(b)
    _check_lock_request(b, req)
    b.queue_locks.unlock(req.consumer_group, req.client_id,
                         [(q.topic, q.queue_id) for q in req.queues])
    return pb.OK, "", pb.LockQueuesResponse()


def _check_lock_request(b: BrokerCore, req: pb.LockQueuesRequest) -> None:
    validate_name("consumer group", req.consumer_group, allow_system=True)
    if not req.client_id:
        raise BadRequestError("a lock request names its client")
    _check_client_id(req.client_id)
    for q in req.queues:
        if not 0 <= q.queue_id < _hosted(b, q.topic):
            raise BadRequestError(f"queue {q.queue_id} of topic {q.topic!r} does not exist")


def _check_client_id(client_id: str) -> None:
    if len(client_id) > MAX_CLIENT_ID_CHARS:
        raise BadRequestError(f"a client id has at most {MAX_CLIENT_ID_CHARS} characters, got "
                              f"{len(client_id)}")


# ------------------------------------------------------------ heartbeat, status
def heartbeat(b: BrokerCore, r: Request) -> Answer:
    req: pb.HeartbeatRequest = r.message
    client_id = req.client_id or r.identity.hex()
    _check_client_id(client_id)
    if len(req.producer_groups) + len(req.consumer_groups) > MAX_GROUPS_PER_CLIENT:
        raise BadRequestError(f"a client belongs to at most {MAX_GROUPS_PER_CLIENT} groups")
    for g in req.producer_groups:
        validate_name("producer group", g)
    for g in req.consumer_groups:
        validate_name("consumer group", g, allow_system=True)
    if client_id not in b.clients and len(b.clients) >= MAX_CLIENTS:
        raise ServiceNotAvailableError(f"this broker already tracks {MAX_CLIENTS} clients")
    b.clients[client_id] = (
        time.monotonic(), list(req.producer_groups), list(req.consumer_groups), r.identity)
    if b.group_topics is not None and b.state.role == MASTER:
        b.group_topics.heard(req.consumer_groups)     # their retry and dead-letter topics
    return pb.OK, "", pb.HeartbeatResponse(broker_group=b.config.group,
                                           broker_id=b.config.broker_id, role=b.state.role)


def broker_status(b: BrokerCore, r: Request) -> Answer:
    store, st, cfg = b.store, b.state, b.config
    resp = pb.BrokerStatusResponse(
        broker_group=cfg.group, broker_id=cfg.broker_id, role=st.role,
        flush=cfg.flush.value, min_physical_offset=store.commitlog.min_offset,
        max_physical_offset=store.commitlog.max_offset, flushed_offset=st.flushed_offset,
        confirmed_offset=st.visible_offset, bad_requests=st.bad_requests,
        messages_stored=store.messages_stored, clients=len(b.clients), epoch=st.epoch,
        master_address=b.master_address() or "", replicated_offset=st.replicated_offset,
        flushes=b.flush_service.syncs if b.flush_service else 0, read_redirects=st.redirects)
    health = b.health()
    resp.ready, resp.ready_reason = readiness(health, cfg.ha_max_gap_bytes,
                                              cfg.ha_housekeeping_ms / 1000)
    resp.master_silent_s = health.master_silent_s
    if b.ha_client is not None:
        resp.master_max_offset = b.ha_client.master_max
    resp.sync_replicas, resp.min_sync_replicas = cfg.sync_replicas, cfg.min_sync_replicas or 0
    if st.role == MASTER:
        resp.in_sync_replicas, resp.degraded = st.in_sync_replicas, b.degraded()
    if b.transactions is not None:
        resp.transactions_pending = len(b.transactions.book.pending)
    resp.transaction_checks = b.metrics.transaction_checks
    resp.transactions_discarded = b.metrics.transactions_discarded
    if b.ha is not None:
        resp.isr.extend(sorted(b.ha.isr_source() or ()))
        for link in b.ha.status():
            resp.replicas.add(broker_id=link["broker_id"], address=link["address"],
                              state=link["state"], acked_offset=link["acked_offset"],
                              lag_bytes=link["lag_bytes"])
    for (topic, qid), cq in sorted(store.queues.items()):
        resp.queues.add(topic=topic, queue_id=qid, min_offset=cq.min_offset,
                        max_offset=store.visible_max_offset(cq, st.visible_offset))
    for (group, topic, qid), off in sorted(b.offsets.items()):
        resp.group_offsets.add(consumer_group=group, topic=topic, queue_id=qid, offset=off)
    return pb.OK, "", resp


HANDLERS: dict[int, Handler] = {
    pb.SEND: send,
    pb.PULL: pull,
    pb.QUERY_OFFSET: query_offset,
    pb.COMMIT_OFFSET: commit_offset,
    pb.FETCH_OFFSET: fetch_offset,
    pb.HEARTBEAT: heartbeat,
    pb.BROKER_STATUS: broker_status,
    pb.LOCK_QUEUES: lock_queues,
    pb.UNLOCK_QUEUES: unlock_queues,
    pb.SEND_BACK: send_back,
    pb.GET_MESSAGE: get_message,
    pb.QUERY_BY_KEY: query_by_key,
    pb.END_TRANSACTION: end_transaction,
    pb.LIST_TRANSACTIONS: list_transactions,
}
