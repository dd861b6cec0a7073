"""PULL_MANY: several queues of a broker in one request, held as a whole."""

import time

import pytest

from duomq.client import Message, Producer, PullConsumer
from duomq.common.message import MessageQueue, decode_records
from duomq.proto import pb

pytestmark = pytest.mark.integration


def _pull(topic: str, queue_id: int, offset: int = 0) -> pb.PullRequest:
    return pb.PullRequest(consumer_group="g", topic=topic, queue_id=queue_id,
                          queue_offset=offset, max_messages=32)


def _fill(p: Producer, topic: str, queue_id: int, n: int, body: bytes = b"m") -> None:
    p.send_batch([Message(topic, body)] * n, queue=MessageQueue(topic, "broker-a", queue_id))


def test_each_queue_is_answered_as_its_own_pull(local_cluster, small_store):
    local_cluster.add_broker("broker-a", **small_store)
    local_cluster.create_topic("Many", queues=3)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    with Producer(zookeeper=zk, cluster=cl) as p, PullConsumer("g", zookeeper=zk, cluster=cl) as c:
        _fill(p, "Many", 0, 5)
        _fill(p, "Many", 2, 40)
        address = c.master_address("broker-a")
        req = pb.PullManyRequest(pulls=[_pull("Many", 0), _pull("Many", 1), _pull("Many", 2, 30),
                                        _pull("Nope", 0), _pull("Many", 0, 99)],
                                 max_wait_ms=10_000)
        t0 = time.monotonic()
        status, error, resp = c.remoting.request(address, pb.PULL_MANY, req, 15).result()
        assert time.monotonic() - t0 < 2.0            # something found: not held
        assert status == pb.OK, error
        e = resp.entries
        assert [x.status for x in e] == [pb.OK, pb.NO_NEW_MESSAGE, pb.OK, pb.TOPIC_NOT_EXIST,
                                         pb.OFFSET_ILLEGAL]
        assert (e[0].response.count, e[0].response.next_offset) == (5, 5)
        assert [m.queue_offset for m in decode_records(e[2].response.records)] == \
            list(range(30, 40))
        assert "Nope" in e[3].error
        assert e[4].response.max_offset == 5


def test_held_as_a_whole_until_any_queue_has_news(local_cluster, small_store):
    local_cluster.add_broker("broker-a", **small_store)
    local_cluster.create_topic("Quiet", queues=4)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    with Producer(zookeeper=zk, cluster=cl) as p, PullConsumer("g", zookeeper=zk, cluster=cl) as c:
        address = c.master_address("broker-a")
        req = pb.PullManyRequest(pulls=[_pull("Quiet", q) for q in range(4)],
                                 max_wait_ms=10_000)
        fut = c.remoting.request(address, pb.PULL_MANY, req, 15)
        time.sleep(0.5)
        assert not fut.done()                         # held at the broker
        sent = time.monotonic()
        _fill(p, "Quiet", 2, 3, b"wake")
        status, error, resp = fut.result(5)
        assert time.monotonic() - sent < 1.0
        assert [x.status for x in resp.entries] == [pb.NO_NEW_MESSAGE] * 2 + [pb.OK] + \
            [pb.NO_NEW_MESSAGE]
        assert [m.body for m in decode_records(resp.entries[2].response.records)] == [b"wake"] * 3
        # and a hold runs out as one answer
        t0 = time.monotonic()
        req = pb.PullManyRequest(pulls=[_pull("Quiet", q) for q in (0, 1)], max_wait_ms=400)
        status, error, resp = c.remoting.request(address, pb.PULL_MANY, req, 15).result(5)
        assert 0.3 < time.monotonic() - t0 < 2.5
        assert [x.status for x in resp.entries] == [pb.NO_NEW_MESSAGE] * 2


def test_one_answer_carries_at_most_max_pull_bytes(local_cluster, small_store):
    local_cluster.add_broker("broker-a", **{**small_store, "max_pull_bytes": 64 * 1024,
                                            "max_queued_bytes_per_client": 64 * 1024})
    local_cluster.create_topic("Big", queues=4)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    with Producer(zookeeper=zk, cluster=cl) as p, PullConsumer("g", zookeeper=zk, cluster=cl) as c:
        for q in range(4):
            _fill(p, "Big", q, 20, b"x" * 1000)       # 20 kB a queue
        address = c.master_address("broker-a")
        req = pb.PullManyRequest(pulls=[_pull("Big", q) for q in range(4)])
        status, error, resp = c.remoting.request(address, pb.PULL_MANY, req, 15).result(5)
        e = resp.entries
        assert sum(len(x.response.records) for x in e) <= 64 * 1024
        assert [x.status for x in e][:3] == [pb.OK] * 3
        assert e[3].status == pb.NO_NEW_MESSAGE       # not read: the answer was full
        assert (e[3].response.next_offset, e[3].response.max_offset) == (0, 20)
        too_many = pb.PullManyRequest(pulls=[_pull("Big", 0)] * 1001)
        status, error, _ = c.remoting.request(address, pb.PULL_MANY, too_many, 15).result(5)
        assert status == pb.BAD_REQUEST and "1001" in error
