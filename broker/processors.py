"""One handler per request type: ``handler(b, request)`` over the broker's
core (``core.BrokerCore``) and the decoded ``Request``. A handler returns
``(status, error, response_message)`` for an answer (OK, or an outcome that
carries a response: SLAVE_NOT_AVAILABLE, NO_MATCHED_MESSAGE, ...), or
``None`` when the answer is deferred (a send waiting for its flush, a held
pull). A request that cannot be served raises a ``DuomqError`` (or a
``RecordError``); the dispatcher answers its status (``errors.answer_for``).
Handlers never touch a socket; the table at the end is what the dispatcher
serves. The handlers that write to the log are in ``writes.py``; what all
handlers share (``Request``, ``Answer``, the role checks) in ``requests.py``."""

from __future__ import annotations

import time

from duomq.auth.acl import topic_read
from duomq.broker.admin import broker_config, delete_group
from duomq.broker.core import BrokerCore, Client
from duomq.broker.health import readiness
from duomq.broker.pull_hold import HeldPull
from duomq.broker.requests import (
    Answer,
    Handler,
    Request,
    client_key,
    hosted,
    master_only,
    stored_record,
)
from duomq.broker.writes import end_transaction, list_transactions, recall, send, send_back
from duomq.common import subscription
from duomq.common.errors import (
    BadRequestError,
    DuomqError,
    MessageCutError,
    ServiceNotAvailableError,
    answer_for,
)
from duomq.common.message import PullStatus, decode_records, lookup_key, make_msg_id
from duomq.common.names import DLQ_PREFIX, RETRY_PREFIX, validate_name
from duomq.controller.election import cut_from
from duomq.format import record as rec
from duomq.format.record import RecordError
from duomq.proto import pb
from duomq.proto.wire import PullAnswer
from duomq.share import handlers as share
from duomq.store.reads import Fresh

QUERY_DEFAULT_NUM = 32        # messages a lookup by key returns unless asked (RocketMQ's)
QUERY_MAX_NUM = 64            # ... and at most
MAX_CLIENT_ID_CHARS = 255     # a client id (ours: host@pid@uuid8)
MAX_GROUPS_PER_CLIENT = 1024  # producer and consumer groups one heartbeat names
MAX_CLIENTS = 100_000         # clients one broker tracks (forgotten after 120 s of silence)
MAX_PULLS_PER_REQUEST = 1000  # queues one PULL_MANY names


# ------------------------------------------------------------ pull
def pull(b: BrokerCore, r: Request) -> Answer | None:
    return _pull(b, r, held=False)


def pull_held(b: BrokerCore, r: Request) -> Answer | None:
    """A held pull answered now: what it finds, or NO_NEW_MESSAGE."""
    return _pull(b, r, held=True)


def _pull(b: BrokerCore, r: Request, held: bool, budget: int | None = None) -> Answer | None:
    """``held``: answer now, never hold; ``budget``: the most bytes to read,
    the first record included (what a PULL_MANY's answer has left)."""
    req: pb.PullRequest = r.message
    cfg, store = b.config, b.store
    cq = store.find_queue(req.topic, req.queue_id)
    if cq is None:
        hosted(b, req.topic)
    if req.queue_offset < 0:
        raise BadRequestError("queue_offset must be >= 0")
    lag, refusal = _replica_lag(b, req.max_replica_lag_ms)
    if refusal is not None:
        return refusal
    max_n, max_b = pull_limits(cfg, req)
    if budget is not None:
        max_b = min(max_b, budget)
    sub = subscription.parse(req.subscription)
    wait_ms = min(req.max_wait_ms, cfg.long_polling_timeout_ms)
    holds = wait_ms > 0 and not held
    fit = (req.queue_offset, max_n, max_b, sub.everything)
    if holds and cq is not None and req.queue_offset == cq.max_offset \
            and _hold(b, r, req, wait_ms, fit):
        return None      # at the queue's end (a consumer caught up): nothing to read or advise
    advice = _advice(b, cq, req.queue_offset) if cq is not None else None
    got = store.get_messages(req.topic, req.queue_id, req.queue_offset, max_n, max_b,
                             b.state.visible_offset, None if sub.everything else sub.codes,
                             first_fits=budget is not None and budget < cfg.max_pull_bytes)
    if got.count:
        return _found(b, got.records, got.count, got.next_offset, got.min_offset,
                      got.max_offset, advice, lag)
    if got.status is PullStatus.NO_MATCHED_MESSAGE:   # pulled again from next_offset
        return got.status.wire, "", _with_lag(PullAnswer(
            next_offset=got.next_offset, min_offset=got.min_offset, max_offset=got.max_offset), lag)
    if got.status is PullStatus.OFFSET_ILLEGAL:
        return got.status.wire, (f"offset {req.queue_offset} is outside "
                                 f"[{got.min_offset}, {got.max_offset}]"), \
            _with_lag(PullAnswer(next_offset=got.next_offset, min_offset=got.min_offset,
                                      max_offset=got.max_offset), lag)
    if holds and _hold(b, r, req, wait_ms, fit):
        return None
    return PullStatus.NO_NEW_MESSAGE.wire, "", _with_lag(PullAnswer(
        next_offset=req.queue_offset, min_offset=got.min_offset, max_offset=got.max_offset), lag)


def _hold(b: BrokerCore, r: Request, req: pb.PullRequest, wait_ms: int,
          fit: tuple[int, int, int, bool]) -> bool:
    """Hold a PULL that found nothing for up to ``wait_ms`` (False: its
    client holds too many); ``fit``: its offset, limits and whether it is
    unfiltered, as read here (``HeldPull.fit``)."""
    now = time.monotonic()
    return b.pull_hold.hold(req.topic, req.queue_id,
                            HeldPull(r.identity, r.request_id, req, now + wait_ms / 1000, now,
                                     fit=fit))


def _found(b: BrokerCore, records, count: int, next_offset: int, min_offset: int,
           max_offset: int, advice: int | None, lag: int | None) -> Answer:
    resp = PullAnswer(count=count, records=records, next_offset=next_offset,
                      min_offset=min_offset, max_offset=max_offset)
    if advice is not None:
        resp.suggest_broker_id = advice
        resp.advice_ttl_ms = b.config.read_advice_ttl_ms
        b.state.redirects += 1
    return pb.OK, "", _with_lag(resp, lag)


def pull_limits(cfg, req: pb.PullRequest) -> tuple[int, int]:
    """The most messages and bytes a PULL reads (what it asks, within the
    broker's bounds)."""
    return (min(req.max_messages or cfg.max_pull_messages, cfg.max_pull_messages),
            min(req.max_bytes or cfg.max_pull_bytes, cfg.max_pull_bytes))


def staged_readable(b: BrokerCore, fresh: Fresh) -> bool:
    """Whether a pull of the staged batch ``fresh`` (``AnswerBook.staged``)
    reads it whole once its second half is written: nothing was written
    after it, and it lies in one consume-queue segment (where a read stops),
    as ``StoreReads.get_messages``'s answer from ``fresh`` requires. Only on
    an ASYNC master (``visibility.before_answer``), where everything written
    is visible once dispatched."""
    qoff, per = fresh.queue_offset, b.config.cq_entries_per_segment
    return fresh.end == b.store.commitlog.max_offset \
        and qoff // per == (qoff + fresh.count - 1) // per


def staged_fits(fit: tuple[int, int, int, bool], fresh: Fresh) -> bool:
    """Whether a PULL held on a ``staged_readable`` batch's queue (``fit``:
    its offset, limits and whether it is unfiltered, ``HeldPull.fit``) is
    answered with exactly that batch by ``_pull`` once the second half is
    written, so that ``pull_staged`` may answer it from those bytes first."""
    offset, max_n, max_b, everything = fit
    return offset == fresh.queue_offset and everything and fresh.count <= max_n \
        and len(fresh.records) <= max_b


def pull_staged(b: BrokerCore, staged: tuple[Fresh, int]) -> Answer:
    """The answer ``_pull`` gives a held PULL that ``staged_fits`` a
    ``staged_readable`` batch, once that batch's second half is written: built from its bytes,
    its first record's offset deciding the read advice as the queue's entry
    would (a master's: no replica lag)."""
    fresh, phys = staged
    cq = b.store.find_queue(fresh.topic, fresh.queue_id)
    assert cq is not None
    end = fresh.queue_offset + fresh.count
    return _found(b, fresh.records, fresh.count, end, cq.min_offset, end,
                  b.parts.read_advice(phys, b.total_memory, None), None)


def pull_many(b: BrokerCore, r: Request) -> Answer | None:
    return _pull_many(b, r, held=False)


def pull_many_held(b: BrokerCore, r: Request) -> Answer | None:
    """A held PULL_MANY answered now: what each of its queues has."""
    return _pull_many(b, r, held=True)


def _pull_many(b: BrokerCore, r: Request, held: bool) -> Answer | None:
    """Each entry served as a PULL that does not wait, within one answer of
    at most ``max_pull_bytes``; held as a whole when none found anything."""
    req: pb.PullManyRequest = r.message
    cfg = b.config
    if not req.pulls:
        raise BadRequestError("a PULL_MANY names no queue")
    if len(req.pulls) > MAX_PULLS_PER_REQUEST:
        raise BadRequestError(f"a PULL_MANY names {len(req.pulls)} queues; at most "
                              f"{MAX_PULLS_PER_REQUEST}")
    resp = pb.PullManyResponse()
    budget = cfg.max_pull_bytes
    news = False
    for p in req.pulls:
        entry = resp.entries.add()
        try:     # once the answer is full, a queue with messages is NO_NEW_MESSAGE (unread)
            answer = _pull(b, Request(r.identity, r.request_id, pb.PULL, p), True, max(budget, 0))
        except (DuomqError, RecordError) as exc:
            answer = (*answer_for(exc), None)
        assert answer is not None               # answered now: never held
        status, error, one = answer
        entry.status, entry.error = status, error
        if one is not None:
            entry.response.CopyFrom(one.message() if isinstance(one, PullAnswer) else one)
            budget -= len(one.records)
        news = news or status != pb.NO_NEW_MESSAGE
    wait_ms = min(req.max_wait_ms, cfg.long_polling_timeout_ms)
    if not news and wait_ms > 0 and not held:
        now = time.monotonic()
        if b.pull_hold.hold_many(HeldPull(
                r.identity, r.request_id, req, now + wait_ms / 1000, now,
                {(p.topic, p.queue_id): p.queue_offset for p in req.pulls})):
            return None
    return pb.OK, "", resp


def _replica_lag(b: BrokerCore, bound_ms: int) -> tuple[int | None, Answer | None]:
    """A slave's lag behind its master (None on a master), and the answer
    REPLICA_LAGGING, naming the lag, when the pull's bound is exceeded."""
    return b.parts.lag_refusal(bound_ms, f"{b.config.group}/{b.config.broker_id}")


def _with_lag(resp: PullAnswer, lag: int | None) -> PullAnswer:
    if lag is not None:
        resp.replica_lag_ms = lag
    return resp


def _advice(b: BrokerCore, cq, queue_offset: int) -> int | None:
    """Read advice for a pull at ``queue_offset`` (decided before the read,
    which would warm the pages it probes): a cold or deep backlog goes to an
    in-sync slave; a slave sends a reader that caught up back to the master."""
    entry = cq.entry(queue_offset)
    if entry is None:
        return None
    return b.parts.read_advice(entry[0], b.total_memory, b.master_id())


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
    queues = hosted(b, req.topic)
    if len(req.queue_ids) > queues:
        raise BadRequestError(f"{len(req.queue_ids)} queues asked of topic {req.topic!r}, "
                              f"which has {queues} on this group")
    return pb.OK, "", pb.QueryOffsetResponse(
        offsets=[_queue_offset(b, req, q) for q in req.queue_ids])


def _queue_offset(b: BrokerCore, req: pb.QueryOffsetRequest, queue_id: int) -> int:
    store, visible = b.store, b.state.visible_offset
    cq = store.find_queue(req.topic, queue_id)
    if cq is None:
        hosted(b, req.topic)
        return 0
    if req.query == pb.MIN_OFFSET:
        return cq.min_offset
    if req.query == pb.MAX_OFFSET:
        return store.visible_max_offset(cq, visible)
    return min(store.offset_by_time(req.topic, queue_id, req.timestamp_ms),
               store.visible_max_offset(cq, visible))


def commit_offset(b: BrokerCore, r: Request) -> Answer:
    req: pb.CommitOffsetRequest = r.message
    master_only(b)                # offsets live on the master; slaves only copy them
    group = validate_name("consumer group", req.consumer_group, allow_system=True)
    for q in req.offsets:          # only queues this group hosts: the table stays bounded
        queues = hosted(b, q.topic)
        if not 0 <= q.queue_id < queues:
            raise BadRequestError(f"queue {q.queue_id} of topic {q.topic!r} does not exist "
                                  f"(this group hosts queues 0..{queues - 1})")
        if q.offset < 0:
            raise BadRequestError(f"offset {q.offset} for {q.topic}#{q.queue_id} is negative")
    b.admit(r.user, "groups", group)
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


def get_message(b: BrokerCore, r: Request) -> Answer:
    req: pb.GetMessageRequest = r.message
    named = req.epoch if req.HasField("epoch") else None
    try:
        view = stored_record(b, req.physical_offset, b.state.visible_offset)
    except BadRequestError:
        if named is not None:
            _cut(b, req.physical_offset, named, None)       # MessageCutError if it was
        raise
    msg = decode_records(view, b.config.group)[0]
    topic, g = msg.topic, req.consumer_group
    own = g and topic in (RETRY_PREFIX + g, DLQ_PREFIX + g)   # read with the group's right
    b.require(r.user, topic_read(topic, g if own else None))
    if named is not None and msg.epoch != named & rec.EPOCH_MASK:
        _cut(b, req.physical_offset, named, msg)
        raise BadRequestError(f"{make_msg_id(b.config.group, req.physical_offset, named)} "
                              f"names no message: offset {req.physical_offset} holds "
                              f"{msg.msg_id}")
    return pb.OK, "", pb.GetMessageResponse(record=bytes(view))


def _cut(b: BrokerCore, offset: int, epoch: int, found) -> None:
    """MessageCutError when the group's epoch history says what the master
    of ``epoch`` wrote at ``offset`` was cut (a later epoch starts at or
    below it); ``found``: the message the offset holds now, if one starts there."""
    history = [(e & rec.EPOCH_MASK, start) for e, start in b.epoch_history()]
    cut = cut_from(epoch, history)
    if cut is None or offset < cut:
        return
    later = min(e for e, start in history if e > epoch and start == cut)
    now = f"holds {found.msg_id}, which the master of epoch {found.epoch} stored" \
        if found is not None else "holds no message that starts there"
    raise MessageCutError(
        f"the message {make_msg_id(b.config.group, offset, epoch)} is no longer stored: the "
        f"master of epoch {epoch} acked it past what its successor held (ASYNC replication, "
        f"or a lagging promotion), and the group's log was cut at offset {cut} when epoch "
        f"{later} began; offset {offset} {now}")


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
    m = master_only(b)            # locks live on the master
    _check_lock_request(b, r, req)
    got = m.queue_locks.lock(req.consumer_group, client_key(r.user, req.client_id),
                             [(q.topic, q.queue_id) for q in req.queues], time.monotonic())
    resp = pb.LockQueuesResponse()
    for topic, qid in got:
        resp.locked.add(topic=topic, queue_id=qid)
    return pb.OK, "", resp


def unlock_queues(b: BrokerCore, r: Request) -> Answer:
    req: pb.LockQueuesRequest = r.message
    m = master_only(b)
    _check_lock_request(b, r, req)
    m.queue_locks.unlock(req.consumer_group, client_key(r.user, req.client_id),
                         [(q.topic, q.queue_id) for q in req.queues])
    return pb.OK, "", pb.LockQueuesResponse()


def _check_lock_request(b: BrokerCore, r: Request, req: pb.LockQueuesRequest) -> None:
    validate_name("consumer group", req.consumer_group, allow_system=True)
    if not req.client_id:
        raise BadRequestError("a lock request names its client")
    _check_client_id(req.client_id)
    for q in req.queues:
        if not 0 <= q.queue_id < hosted(b, q.topic):
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
    key = client_key(r.user, client_id)
    if not req.leaving:
        b.admit(r.user, "clients", client_id)   # the broker's client table, bounded per user
        for g in req.consumer_groups:       # the group nodes it makes count, bounded per user
            b.admit(r.user, "groups", g)
    if req.leaving:                      # a client closing: no longer a reader of its groups
        b.clients.pop(key, None)
        for g in req.consumer_groups:
            b.parts.left_reader(g, key)
        return pb.OK, "", pb.HeartbeatResponse(broker_group=b.config.group,
                                               broker_id=b.config.broker_id, role=b.role)
    known = b.clients.get(key)
    if known is None and len(b.clients) >= MAX_CLIENTS:
        raise ServiceNotAvailableError(f"this broker already tracks {MAX_CLIENTS} clients")
    b.clients[key] = Client(time.monotonic(), list(req.producer_groups),
                                  list(req.consumer_groups), r.identity, r.user)
    if b.group_nodes is not None and req.consumer_groups:
        b.group_nodes(req.consumer_groups)    # their nodes, for their members to join
    return pb.OK, "", pb.HeartbeatResponse(broker_group=b.config.group,
                                           broker_id=b.config.broker_id, role=b.role)


def broker_status(b: BrokerCore, r: Request) -> Answer:
    store, st, cfg = b.store, b.state, b.config
    resp = pb.BrokerStatusResponse(
        broker_group=cfg.group, broker_id=cfg.broker_id, role=b.role,
        flush=cfg.flush.value, min_physical_offset=store.commitlog.min_offset,
        max_physical_offset=store.commitlog.max_offset, flushed_offset=st.flushed_offset,
        confirmed_offset=st.visible_offset, bad_requests=st.bad_requests,
        messages_stored=store.messages_stored, clients=len(b.clients), epoch=st.epoch,
        master_address=b.master_address() or "",
        flushes=b.flush_service.syncs if b.flush_service else 0, read_redirects=st.redirects)
    health = b.health()
    resp.ready, resp.ready_reason = readiness(health, cfg.ha_max_gap_bytes,
                                              cfg.ha_housekeeping_ms / 1000)
    resp.master_silent_s = health.master_silent_s
    resp.sync_replicas, resp.min_sync_replicas = cfg.sync_replicas, cfg.min_sync_replicas or 0
    b.parts.describe(resp)
    resp.transaction_checks = b.metrics.transaction_checks
    resp.transactions_discarded = b.metrics.transactions_discarded
    resp.timers_fired, resp.timers_recalled = b.metrics.timers_fired, b.metrics.timers_recalled
    for (topic, qid), cq in sorted(store.queues.items()):
        resp.queues.add(topic=topic, queue_id=qid, min_offset=cq.min_offset,
                        max_offset=store.visible_max_offset(cq, st.visible_offset))
    for (group, topic, qid), off in sorted(b.offsets.items()):
        resp.group_offsets.add(consumer_group=group, topic=topic, queue_id=qid, offset=off)
    return pb.OK, "", resp


# the writes are in writes.py
HANDLERS: dict[int, Handler] = {
    pb.SEND: send,
    pb.PULL: pull,
    pb.PULL_MANY: pull_many,
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
    pb.RECALL: recall,
    pb.LIST_TRANSACTIONS: list_transactions,
    pb.DELETE_GROUP: delete_group,
    pb.BROKER_CONFIG: broker_config,
    pb.POP: share.pop,
    pb.SHARE_ACK: share.share_ack,
}
