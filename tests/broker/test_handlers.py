"""The request handlers in-process: a BrokerCore over a temporary directory,
no ZooKeeper and no sockets but the master's replication ROUTER. Each main
request type as a client makes it, on a master and on a slave."""

import time

import pytest
import zmq

from duomq.broker.core import BrokerCore
from duomq.broker.processors import HANDLERS
from duomq.broker.requests import Request
from duomq.common.config import BrokerConfig
from duomq.common.errors import (
    BadRequestError,
    NotMasterError,
    ServiceNotAvailableError,
    TopicNotExistError,
)
from duomq.common.message import decode_records
from duomq.common.role import Role
from duomq.format import record as rec
from duomq.master.parts import MasterParts
from duomq.proto import pb

TOPIC = "Orders"


def call(core, type_, message, identity=b"client-1"):
    """A request served as the serving loop serves it: what the sends before
    it left for after their acks is done first (``AnswerBook.serving``)."""
    core.answers.settle()
    return HANDLERS[type_](core, Request(identity, 7, type_, message))


def records(n, start=0, tags=b"TagA", keys=b""):
    return b"".join(rec.encode_record(TOPIC.encode(), tags, keys, b"", b"body-%d" % i, 1)
                    for i in range(start, start + n))


@pytest.fixture
def ctx():
    c = zmq.Context()
    yield c
    c.term()


def make_core(tmp_path, ctx, role=Role.MASTER, **settings):
    cfg = BrokerConfig(data_dir=str(tmp_path / "store"), segment_size_bytes=1 << 20,
                       max_message_bytes=64 << 10, max_pull_bytes=256 << 10,
                       **settings)
    core = BrokerCore(cfg)
    core.store.start()
    core.offsets.load()
    core.hosted_topics = lambda: {TOPIC: 4}
    if role is Role.MASTER:
        sock = ctx.socket(zmq.ROUTER)
        sock.setsockopt(zmq.LINGER, 0)
        core.parts = MasterParts(core.store, cfg, 1, core.offsets, sock, core.metrics,
                                 lease_until=time.monotonic() + 3600)
        core.state.epoch = 1
        core._sock = sock
    return core


def close(core):
    core.parts.stop("test over")
    sock = getattr(core, "_sock", None)
    if sock is not None:
        sock.close(0)
    core.store.close()


@pytest.fixture
def master(tmp_path, ctx):
    core = make_core(tmp_path, ctx)
    yield core
    close(core)


def send(core, n=3, queue=0, **kw):
    status, error, resp = call(core, pb.SEND, pb.SendRequest(
        topic=TOPIC, queue_id=queue, count=n, records=records(n, **kw)))
    assert status == pb.OK, error
    core.answers.settle()                                      # after the ack, as the loop
    core.state.visible_offset = core.store.dispatched_offset   # ASYNC: visible at once
    return resp


def test_send_then_pull_reads_what_was_stored(master):
    resp = send(master, 3)
    assert (resp.queue_offset, len(resp.physical_offsets), resp.epoch) == (0, 3, 1)
    status, _, got = call(master, pb.PULL, pb.PullRequest(
        consumer_group="g", topic=TOPIC, queue_id=0, queue_offset=0, max_messages=10))
    assert status == pb.OK and got.count == 3 and got.next_offset == 3
    assert [m.body for m in decode_records(got.records)] == [b"body-0", b"body-1", b"body-2"]
    status, _, none = call(master, pb.PULL, pb.PullRequest(
        consumer_group="g", topic=TOPIC, queue_id=0, queue_offset=3))
    assert status == pb.NO_NEW_MESSAGE and none.next_offset == 3


def test_a_pull_that_may_wait_is_held_and_pull_many_reads_several_queues(master):
    held = call(master, pb.PULL, pb.PullRequest(consumer_group="g", topic=TOPIC, queue_id=1,
                                                queue_offset=0, max_wait_ms=1000))
    assert held is None and master.pull_hold.held
    send(master, 2, queue=1)
    send(master, 1, queue=2)
    status, _, many = call(master, pb.PULL_MANY, pb.PullManyRequest(pulls=[
        pb.PullRequest(topic=TOPIC, queue_id=q, queue_offset=0) for q in (1, 2, 3)]))
    assert status == pb.OK
    assert [(e.status, e.response.count) for e in many.entries] == \
        [(pb.OK, 2), (pb.OK, 1), (pb.NO_NEW_MESSAGE, 0)]


def test_a_pull_at_its_queues_end_is_held_without_a_read_and_every_other_is_read(
        master, monkeypatch):
    """A PULL at the end of its queue (a consumer caught up: the common long
    poll) is held without reading the store or deciding read advice; one that
    may not wait, one past or before the end, and one whose client holds
    too many are answered as the read says (NO_NEW_MESSAGE with the queue's
    bounds, OFFSET_ILLEGAL, the messages)."""
    from duomq.broker import pull_hold
    send(master, 3, queue=1)
    reads = []
    real = master.store.get_messages
    monkeypatch.setattr(master.store, "get_messages",
                        lambda *a, **k: reads.append(a[2]) or real(*a, **k))

    def pull(offset, wait_ms=1000, identity=b"client-1"):
        return call(master, pb.PULL, pb.PullRequest(
            consumer_group="g", topic=TOPIC, queue_id=1, queue_offset=offset,
            max_wait_ms=wait_ms), identity=identity)

    assert pull(3) is None and reads == []
    assert [p.fit for p in master.pull_hold.held[(TOPIC, 1)]] == \
        [(3, master.config.max_pull_messages, 256 << 10, True)]
    status, _, resp = pull(3, wait_ms=0)
    assert (status, resp.next_offset, resp.min_offset, resp.max_offset) == \
        (pb.NO_NEW_MESSAGE, 3, 0, 3) and reads == [3]
    status, _, resp = pull(4)
    assert (status, resp.next_offset) == (pb.OFFSET_ILLEGAL, 3)
    status, _, resp = pull(1)
    assert (status, resp.count, resp.next_offset) == (pb.OK, 2, 3)
    monkeypatch.setattr(pull_hold, "MAX_HELD_PER_CLIENT", 1)
    status, _, resp = pull(3)                  # client-1 holds one already: not held
    assert (status, resp.next_offset, resp.max_offset) == (pb.NO_NEW_MESSAGE, 3, 3)
    assert len(master.pull_hold.held[(TOPIC, 1)]) == 1


def test_offsets_query_commit_and_fetch(master):
    send(master, 5)
    _, _, top = call(master, pb.QUERY_OFFSET, pb.QueryOffsetRequest(
        topic=TOPIC, queue_id=0, query=pb.MAX_OFFSET))
    assert top.offset == 5
    call(master, pb.COMMIT_OFFSET, pb.CommitOffsetRequest(
        consumer_group="g", offsets=[pb.QueueOffset(topic=TOPIC, queue_id=0, offset=4)]))
    _, _, got = call(master, pb.FETCH_OFFSET, pb.FetchOffsetRequest(
        consumer_group="g", queues=[pb.QueueOffset(topic=TOPIC, queue_id=0)]))
    assert got.offsets[0].offset == 4
    with pytest.raises(BadRequestError, match="queue 9"):
        call(master, pb.COMMIT_OFFSET, pb.CommitOffsetRequest(
            consumer_group="g", offsets=[pb.QueueOffset(topic=TOPIC, queue_id=9, offset=1)]))


def test_lookups_by_offset_and_by_key(master):
    resp = send(master, 2, keys=b"order-17")
    _, _, one = call(master, pb.GET_MESSAGE,
                     pb.GetMessageRequest(physical_offset=resp.physical_offsets[1]))
    assert decode_records(one.record)[0].body == b"body-1"
    _, _, found = call(master, pb.QUERY_BY_KEY, pb.QueryByKeyRequest(topic=TOPIC,
                                                                      key="order-17"))
    assert found.count == 2
    with pytest.raises(BadRequestError, match="no message is stored"):
        call(master, pb.GET_MESSAGE, pb.GetMessageRequest(physical_offset=3))


def test_heartbeat_locks_and_status(master):
    _, _, hb = call(master, pb.HEARTBEAT, pb.HeartbeatRequest(
        client_id="c1", producer_groups=["p"], consumer_groups=["g"]))
    assert hb.role == "MASTER" and master.producers("p", "T") == [b"client-1"]
    q = pb.QueueRef(topic=TOPIC, queue_id=0)
    _, _, locked = call(master, pb.LOCK_QUEUES, pb.LockQueuesRequest(
        consumer_group="g", client_id="c1", queues=[q]))
    _, _, other = call(master, pb.LOCK_QUEUES, pb.LockQueuesRequest(
        consumer_group="g", client_id="c2", queues=[q]))
    assert len(locked.locked) == 1 and len(other.locked) == 0
    call(master, pb.UNLOCK_QUEUES, pb.LockQueuesRequest(consumer_group="g", client_id="c1",
                                                        queues=[q]))
    _, _, taken = call(master, pb.LOCK_QUEUES, pb.LockQueuesRequest(
        consumer_group="g", client_id="c2", queues=[q]))
    assert len(taken.locked) == 1
    send(master, 2)
    _, _, st = call(master, pb.BROKER_STATUS, pb.BrokerStatusRequest())
    assert st.role == "MASTER" and st.ready and st.max_physical_offset > 0
    assert [(x.topic, x.queue_id, x.max_offset) for x in st.queues] == [(TOPIC, 0, 2)]


def test_send_back_goes_to_the_groups_retry_topic_and_transactions_end(master):
    resp = send(master, 1)
    master.hosted_topics = lambda: {TOPIC: 4, "%RETRY%g": 1}
    _, _, back = call(master, pb.SEND_BACK, pb.SendBackRequest(
        consumer_group="g", physical_offset=resp.physical_offsets[0], max_reconsume_times=16))
    assert back.topic == "%RETRY%g"
    _, _, listing = call(master, pb.LIST_TRANSACTIONS, pb.ListTransactionsRequest())
    assert listing.pending == 0
    with pytest.raises(BadRequestError):
        call(master, pb.END_TRANSACTION, pb.EndTransactionRequest(half_offset=0, action=0))


def test_bad_requests_are_refused_by_name(master):
    with pytest.raises(TopicNotExistError):
        call(master, pb.SEND, pb.SendRequest(topic="Nope", queue_id=0, count=1,
                                             records=records(1)))
    with pytest.raises(BadRequestError, match="does not exist"):
        call(master, pb.SEND, pb.SendRequest(topic=TOPIC, queue_id=4, count=1,
                                             records=records(1)))
    with pytest.raises(BadRequestError, match="queue_offset"):
        call(master, pb.PULL, pb.PullRequest(topic=TOPIC, queue_id=0, queue_offset=-1))
    master.parts.lease_until = 0.0                  # the lease lapsed: fenced
    with pytest.raises(ServiceNotAvailableError, match="lease"):
        call(master, pb.SEND, pb.SendRequest(topic=TOPIC, queue_id=0, count=1,
                                             records=records(1)))


def test_a_slave_answers_writes_with_not_master_and_serves_nothing_unconfirmed(tmp_path, ctx):
    slave = make_core(tmp_path, ctx, role=Role.SLAVE)
    try:
        for type_, message in (
                (pb.SEND, pb.SendRequest(topic=TOPIC, queue_id=0, count=1, records=records(1))),
                (pb.COMMIT_OFFSET, pb.CommitOffsetRequest(consumer_group="g")),
                (pb.LOCK_QUEUES, pb.LockQueuesRequest(consumer_group="g", client_id="c")),
                (pb.END_TRANSACTION, pb.EndTransactionRequest()),
                (pb.SEND_BACK, pb.SendBackRequest(consumer_group="g"))):
            with pytest.raises(NotMasterError, match="is a slave"):
                call(slave, type_, message)
        status, _, got = call(slave, pb.PULL, pb.PullRequest(topic=TOPIC, queue_id=0,
                                                             queue_offset=0))
        assert status == pb.NO_NEW_MESSAGE and got.count == 0
        _, _, st = call(slave, pb.BROKER_STATUS, pb.BrokerStatusRequest())
        assert st.role == "SLAVE" and not st.ready
    finally:
        close(slave)


def test_an_operator_deletes_a_groups_offsets_and_changes_runtime_settings(master):
    send(master, 3)
    call(master, pb.COMMIT_OFFSET, pb.CommitOffsetRequest(
        consumer_group="g", offsets=[pb.QueueOffset(topic=TOPIC, queue_id=0, offset=2)]))
    _, _, gone = call(master, pb.DELETE_GROUP, pb.DeleteGroupRequest(consumer_group="g"))
    assert gone.queues == 1 and master.offsets.fetch("g", TOPIC, 0) == -1
    _, _, got = call(master, pb.BROKER_CONFIG, pb.BrokerConfigRequest())
    assert got.values["max_pull_messages"] == "1024" and "max_pull_messages" in got.runtime
    assert got.values["flush"] == "ASYNC_FLUSH"
    _, _, changed = call(master, pb.BROKER_CONFIG, pb.BrokerConfigRequest(
        set={"max_pull_messages": "2", "access_in_memory_max_ratio": "0.5"}))
    assert sorted(changed.changed) == ["access_in_memory_max_ratio", "max_pull_messages"]
    assert master.parts.config.access_in_memory_max_ratio == 0.5     # where it is read
    _, _, got = call(master, pb.PULL, pb.PullRequest(topic=TOPIC, queue_id=0, queue_offset=0,
                                                     max_messages=10))
    assert got.count == 2                                            # the new limit, at once
    for bad, says in (({"port": "1"}, "cannot change while the broker runs"),
                      ({"nonsense": "1"}, "no such setting: nonsense"),
                      ({"max_pull_messages": "-3"}, "max_pull_messages"),
                      ({"max_pull_bytes": "10"}, "max_pull_bytes")):
        with pytest.raises(BadRequestError, match=says):
            call(master, pb.BROKER_CONFIG, pb.BrokerConfigRequest(set=bad))
    assert master.config.max_pull_messages == 2                      # nothing half-applied


def test_a_held_pull_answered_from_the_staged_batch_is_answered_as_after_its_second_half(
        tmp_path, ctx, monkeypatch, c_loops):
    """An ASYNC send answers the PULLs held at its queue's end from its staged
    batch, before the batch's second half (``visibility.answer_staged``). For
    300 random batches and held pulls (limits at, below and above the batch,
    filters, offsets before, at and past the queue's end, other queues,
    batches across a consume-queue segment's edge, read advice given),
    whenever ``staged_fits`` says so the answer is the one the PULL handler
    gives once the second half is written and the offsets computed: the same
    status, the same bytes, the same redirect count. And it says so for the
    common case (half of these requests are a consumer's at the end)."""
    import random

    from duomq.broker.processors import (
        pull_held,
        pull_limits,
        pull_staged,
        staged_fits,
        staged_readable,
    )
    from duomq.common import subscription
    from duomq.master import parts as master_parts
    core = make_core(tmp_path, ctx, cq_entries_per_segment=16)
    rng = random.Random(41)
    monkeypatch.setattr(master_parts, "ADVICE_MIN_BEHIND", 0)
    core.parts.ha.in_sync_ids = lambda: [1]
    fitted = 0
    try:
        for i in range(300):
            queue = rng.randrange(2)
            n = rng.choice([1, 1, 2, 3, 7, 20])
            batch = b"".join(rec.encode_record(
                TOPIC.encode(), rng.choice([b"TagA", b"TagB"]), b"", b"",
                b"%d-%d-" % (i, k) + b"x" * rng.randrange(300), 1) for k in range(n))
            end = core.store.find_queue(TOPIC, queue)
            qoff = end.max_offset if end is not None else 0
            req = pb.PullRequest(                # a consumer at the end, as most are
                consumer_group="g", topic=TOPIC, queue_id=queue, queue_offset=qoff,
                max_messages=32, subscription="*") if rng.random() < 0.5 else pb.PullRequest(
                consumer_group="g", topic=TOPIC, queue_id=rng.choice([queue, queue, 1 - queue]),
                queue_offset=max(0, qoff + rng.choice([0, 0, 0, -1, 1])),
                max_messages=rng.choice([0, 0, 1, n - 1, n, 32]),
                max_bytes=rng.choice([0, 0, len(batch) - 1, len(batch), 1 << 20]),
                subscription=rng.choice(["", "*", "*", "TagA", "TagA || TagB"]),
                max_replica_lag_ms=rng.choice([0, 500]))
            core.total_memory = rng.choice([1, 1 << 40])   # advice to the slave, or none
            status, error, _resp = HANDLERS[pb.SEND](core, Request(b"p", i, pb.SEND, pb.SendRequest(
                topic=TOPIC, queue_id=queue, count=n, records=batch)))
            assert status == pb.OK, error
            staged = core.answers.staged()      # None: a segment to open, written at once
            assert staged is None or staged[0].queue_offset == qoff
            early = None
            # as the PULL handler holds it: on its queue, with its offset and limits read
            fit = (req.queue_offset, *pull_limits(core.config, req),
                   subscription.parse(req.subscription).everything)
            if staged is not None and (req.topic, req.queue_id) == (TOPIC, queue) \
                    and staged_readable(core, staged[0]) and staged_fits(fit, staged[0]):
                fitted += 1
                before = core.state.redirects
                early = pull_staged(core, staged)
                early_redirects = core.state.redirects - before
            core.answers.settle()
            core.state.visible_offset = core.parts.visible(core.store.dispatched_offset, core.state)
            assert core.answers.staged() is None
            if early is not None:
                before = core.state.redirects
                late = pull_held(core, Request(b"c", i, pb.PULL, req))
                assert late is not None
                assert (early[0], early[1], early[2].SerializeToString()) == \
                    (late[0], late[1], late[2].SerializeToString()), (i, req)
                assert early_redirects == core.state.redirects - before
    finally:
        close(core)
    assert fitted >= 120, fitted
