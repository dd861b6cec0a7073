"""Send and pull against a real broker process and a real ZooKeeper."""

import threading
import time

import pytest

from duomq.client import Message, Producer, PullConsumer, PullStatus, SendStatus
from duomq.common.errors import (
    BadRequestError,
    ConfigError,
    MessageTooLargeError,
    TopicNotExistError,
)
from duomq.common.message import MessageQueue, parse_msg_id
from duomq.proto import pb

pytestmark = pytest.mark.integration


@pytest.fixture
def one_broker(local_cluster, small_store):
    local_cluster.add_broker("broker-a", **small_store)
    local_cluster.create_topic("Orders", queues=4)
    return local_cluster


def clients(c, **kw):
    return (Producer(zookeeper=c.zookeeper, cluster=c.cluster, **kw),
            PullConsumer("readers", zookeeper=c.zookeeper, cluster=c.cluster))


def drain(consumer, mq, start=0):
    out, off = [], start
    while True:
        r = consumer.pull(mq, off, 500)
        if r.status is not PullStatus.FOUND:
            return out
        out += r.messages
        off = r.next_offset


def test_send_then_pull_every_field(one_broker):
    p, c = clients(one_broker)
    with p, c:
        r = p.send(Message("Orders", b"hello", tags="TagA", keys=["k1", "k2"],
                           properties={"origin": "test"}))
        assert r.status is SendStatus.SEND_OK and r.ok
        group, phys = parse_msg_id(r.msg_id)
        assert group == "broker-a" and r.queue.broker_group == "broker-a"
        msgs = drain(c, r.queue, r.queue_offset)
        m = msgs[0]
        assert (m.body, m.tags, m.keys, m.properties) == (b"hello", "TagA", "k1 k2",
                                                           {"origin": "test"})
        assert (m.queue_id, m.queue_offset, m.physical_offset, m.msg_id) == \
            (r.queue.queue_id, r.queue_offset, phys, r.msg_id)
        assert m.store_timestamp_ms >= m.born_timestamp_ms - 1000


def test_round_robin_batches_and_queue_order(one_broker):
    p, c = clients(one_broker)
    with p, c:
        results = [p.send_batch([Message("Orders", b"%d-%d" % (b, i)) for i in range(100)])
                   for b in range(8)]
        assert {r.queue.queue_id for r in results} == {0, 1, 2, 3}
        assert all(len(r.msg_ids) == 100 for r in results)
        total = 0
        for mq in c.queues("Orders"):
            msgs = drain(c, mq)
            assert [m.queue_offset for m in msgs] == list(range(len(msgs)))
            total += len(msgs)
            # batches land whole and in order on their queue
            mine = [r for r in results if r.queue == mq]
            assert [m.msg_id for m in msgs] == [i for r in mine for i in r.msg_ids]
        assert total == 800


def test_sharding_key_selector_async_and_oneway(one_broker):
    p, c = clients(one_broker)
    with p, c:
        a = p.send(Message("Orders", b"1"), sharding_key="order-7")
        b = p.send(Message("Orders", b"2"), sharding_key="order-7")
        assert a.queue == b.queue and b.queue_offset == a.queue_offset + 1
        chosen = p.send(Message("Orders", b"3"), selector=lambda qs, msg, arg: qs[arg], arg=2)
        assert chosen.queue.queue_id == 2
        got = []
        done = threading.Event()
        fut = p.send_async(Message("Orders", b"async"), lambda res, exc: (got.append((res, exc)),
                                                                          done.set()))
        assert fut.result(10).ok
        assert done.wait(10) and got[0][1] is None and got[0][0].msg_id == fut.result().msg_id
        p.send_oneway(Message("Orders", b"oneway"), sharding_key="ow")
        mq = p.send(Message("Orders", b"marker"), sharding_key="ow").queue
        deadline = time.monotonic() + 10   # oneway: no answer, so wait until it is stored
        while b"oneway" not in [m.body for m in drain(c, mq)]:
            assert time.monotonic() < deadline, "the oneway message never arrived"
            time.sleep(0.05)


def test_offsets_min_max_time_commit_and_fetch(one_broker):
    p, c = clients(one_broker)
    with p, c:
        mq = MessageQueue("Orders", "broker-a", 1)
        assert (c.min_offset(mq), c.max_offset(mq)) == (0, 0)
        p.send_batch([Message("Orders", b"early")] * 5, queue=mq)
        time.sleep(0.02)
        t = int(time.time() * 1000)
        time.sleep(0.02)
        p.send_batch([Message("Orders", b"late")] * 3, queue=mq)
        assert (c.min_offset(mq), c.max_offset(mq)) == (0, 8)
        assert c.offset_by_time(mq, t) == 5
        assert c.offset_by_time(mq, 0) == 0
        assert c.offset_by_time(mq, t + 3_600_000) == 8
        assert c.committed(mq) == -1
        c.commit({mq: 6})
        assert c.committed(mq) == 6
        r = c.pull(mq, 100)
        assert r.status is PullStatus.OFFSET_ILLEGAL and r.next_offset == 8


def test_offsets_of_many_queues_in_one_request(one_broker):
    """A consumer taking many queues asks their offsets in bulk; the answers
    are those of the one-queue queries, in the order asked."""
    p, c = clients(one_broker)
    with p, c:
        mqs = [MessageQueue("Orders", "broker-a", q) for q in (3, 0, 2, 1)]
        for n, mq in enumerate(mqs):
            p.send_batch([Message("Orders", b"x")] * (n + 1), queue=mq)
        c.commit({mqs[1]: 1})
        assert c.offsets(mqs, pb.MAX_OFFSET) == {mq: n + 1 for n, mq in enumerate(mqs)}
        assert c.offsets(mqs, pb.MIN_OFFSET) == dict.fromkeys(mqs, 0)
        assert c.offsets(mqs, pb.BY_TIME, int(time.time() * 1000) + 3_600_000) == \
            {mq: c.max_offset(mq) for mq in mqs}
        assert c.committed_many(mqs) == {mqs[0]: -1, mqs[1]: 1, mqs[2]: -1, mqs[3]: -1}
        # more queues than the topic has on this group: refused, nothing answered
        too_many = pb.QueryOffsetRequest(topic="Orders", query=pb.MIN_OFFSET,
                                         queue_ids=list(range(5)))
        with pytest.raises(BadRequestError, match="5 queues asked of topic 'Orders'"):
            c._ask_offsets(mqs[0], too_many)


def test_consumer_offsets_survive_a_broker_restart(one_broker):
    p, c = clients(one_broker)
    mq = MessageQueue("Orders", "broker-a", 0)
    with p, c:
        p.send_batch([Message("Orders", b"x")] * 10, queue=mq)
        c.commit({mq: 7})
    one_broker.brokers[0].restart()
    p, c = clients(one_broker)
    with p, c:
        assert c.committed(mq) == 7
        assert c.max_offset(mq) == 10
        assert len(drain(c, mq)) == 10


def test_client_side_refusals(one_broker):
    p, c = clients(one_broker, max_message_bytes=1000)
    with p, c:
        with pytest.raises(MessageTooLargeError):
            p.send(Message("Orders", b"x" * 2000))
        with pytest.raises(TopicNotExistError):
            p.send(Message("NoSuchTopic", b"x"))
    with pytest.raises(ConfigError, match="send_timeout_ms"):
        Producer(zookeeper=one_broker.zookeeper, cluster=one_broker.cluster, send_timeout_ms=0)


def test_producer_timeout_below_broker_flush_timeout_is_refused(local_cluster, small_store):
    local_cluster.add_broker("broker-a", flush="SYNC_FLUSH", sync_flush_timeout_ms=5000,
                             **small_store)
    with pytest.raises(ConfigError, match="send_timeout_ms.*broker-a"):
        Producer(zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster, send_timeout_ms=4000)
    Producer(zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster, send_timeout_ms=6000).close()


def test_clients_heartbeat_to_brokers(one_broker):
    import zmq

    from duomq.proto import codec, pb
    p, c = clients(one_broker)
    with p, c:
        ctx = zmq.Context.instance()
        s = ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.connect(one_broker.brokers[0].address)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            s.send(codec.encode_request(1, pb.BROKER_STATUS, pb.BrokerStatusRequest()))
            st = codec.decode_response(codec.decode_frame(s.recv()))
            if st.clients >= 2:
                break
            time.sleep(0.1)
        s.close()
        assert st.clients >= 2


@pytest.mark.slow
def test_a_dead_group_costs_one_failed_attempt_not_one_per_send(local_cluster, small_store):
    a = local_cluster.add_broker("broker-a", **small_store)
    local_cluster.add_broker("broker-b", **small_store)
    local_cluster.create_topic("Spread", queues=2)
    with Producer(zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster,
                  send_timeout_ms=8000) as p:
        assert {p.send(Message("Spread", b"warm")).queue.broker_group for _ in range(4)} == \
            {"broker-a", "broker-b"}
        a.kill()                    # its route lingers in ZooKeeper until the session expires
        t0 = time.monotonic()
        results = [p.send(Message("Spread", b"after %d" % i)) for i in range(20)]
        took = time.monotonic() - t0
        assert all(r.ok and r.queue.broker_group == "broker-b" for r in results)
        assert took < 4.0, f"20 sends took {took:.1f} s with one group dead"
