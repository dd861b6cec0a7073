"""Subscriptions by tag against real brokers: pulls from the master and from
a slave carry only the subscribed tags, a push consumer commits past the
messages it never saw, and a bad expression is refused."""

import time

import pytest

from duomq.client import Message, Producer, PullConsumer, PullStatus, PushConsumer
from duomq.common.errors import BadRequestError
from duomq.testing.harness import wait_for, wait_slaves_hold

pytestmark = pytest.mark.integration
TAGS = ["Click", "Order", "Refund", ""]


def produce(c, n=400):
    with Producer(zookeeper=c.zookeeper, cluster=c.cluster) as p:
        p.send_batch([Message("Shop", b"m%d" % i, tags=TAGS[i % 4]) for i in range(n)])


def drain(consumer, subscription):
    out = []
    for q in consumer.queues("Shop"):
        off = 0
        while True:
            got = consumer.pull(q, off, max_messages=16, subscription=subscription)
            if got.status is PullStatus.NO_NEW_MESSAGE:
                break
            out += got.messages
            off = got.next_offset
    return out


def test_pulls_from_master_and_slave_carry_only_the_subscribed_tags(local_cluster):
    local_cluster.add_broker("broker-a", 0)
    local_cluster.add_broker("broker-a", 1)
    local_cluster.create_topic("Shop", queues=2)
    produce(local_cluster)
    wait_slaves_hold(local_cluster.zookeeper, local_cluster.cluster, "Shop")
    for read_from in ("master", "slave"):
        with PullConsumer("g", zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster,
                          read_from=read_from) as c:
            got = drain(c, "Order || Refund")
            assert sorted(m.body for m in got) == sorted(
                b"m%d" % i for i in range(400) if TAGS[i % 4] in ("Order", "Refund")), read_from
            assert len(drain(c, "*")) == 400
            assert drain(c, "Nothing") == []
            with pytest.raises(BadRequestError, match="empty tag"):
                c.pull(c.queues("Shop")[0], 0, subscription="Order ||")


def test_a_push_consumer_sees_its_tags_and_commits_past_the_rest(local_cluster):
    local_cluster.add_broker("broker-a", 0)
    local_cluster.create_topic("Shop", queues=2)
    produce(local_cluster)
    seen = []
    with PushConsumer("refunds", topic="Shop", on_message=seen.append, subscription="Refund",
                      zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster,
                      consume_from="first").start() as pc:
        wait_for(lambda: len(seen) == 100, 20, "100 refunds")
        time.sleep(0.3)
        pc.commit_offsets()
        committed = {pq.mq: pq.committed for pq in pc.assigned.values() if pq.mq.topic == pc.topic}
    assert {m.tags for m in seen} == {"Refund"} and len(seen) == 100
    # every queue is committed to its end, past the messages filtered out
    with PullConsumer("x", zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster) as c:
        assert committed == {q: c.max_offset(q) for q in c.queues("Shop")}


def test_the_consume_command_takes_a_subscription(local_cluster):
    import json
    import os
    import subprocess
    import sys
    local_cluster.add_broker("broker-a", 0)
    local_cluster.create_topic("Shop", queues=2)
    produce(local_cluster)
    p = subprocess.run([sys.executable, "-m", "duomq", "consume", "Shop", "--group", "cli",
                        "--from", "first", "--tags", "Click || Order", "--until-idle", "1.5",
                        "--json", "--zookeeper", local_cluster.zookeeper,
                        "--cluster", local_cluster.cluster],
                       capture_output=True, text=True, timeout=60, env=os.environ)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(line) for line in p.stdout.splitlines()]
    messages = [m for m in lines if "msg_id" in m]
    assert len(messages) == 200 and {m["tags"] for m in messages} == {"Click", "Order"}
