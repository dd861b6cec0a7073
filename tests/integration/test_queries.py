"""Lookups against real brokers: messages by key through the key index
(newest first, a time range, across broker groups, on the master and on a
slave, through a failover), from the client and the CLI."""

import json
import os
import subprocess
import sys
import time

import pytest

from duomq.client import Message, Producer, PullConsumer
from duomq.common.errors import BadRequestError, NoRouteError
from duomq.common.message import decode_records
from duomq.proto import pb
from duomq.testing.harness import wait_for, wait_slaves_hold

pytestmark = pytest.mark.integration


def cli(local_cluster, *args, ok=True):
    env = {**os.environ, "DUOMQ_ZOOKEEPER": local_cluster.zookeeper,
           "DUOMQ_CLUSTER": local_cluster.cluster}
    p = subprocess.run([sys.executable, "-m", "duomq", *args], env=env, capture_output=True,
                       text=True, timeout=60)
    assert (p.returncode == 0) == ok, p.stderr
    return p


def test_messages_by_key_on_master_and_slave_and_through_a_failover(local_cluster, small_store):
    sync = dict(replication="SYNC", flush="SYNC_FLUSH", **small_store)
    a0 = local_cluster.add_broker("broker-a", 0, **sync)
    a1 = local_cluster.add_broker("broker-a", 1, **sync)
    local_cluster.add_broker("broker-b", 0, **small_store)
    local_cluster.create_topic("Orders", queues=2)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    sent = {}
    with Producer(zookeeper=zk, cluster=cl) as p:
        for i in range(40):
            r = p.send(Message("Orders", f"m{i}", keys=[f"order-{i % 10}", f"batch-{i // 10}"]))
            sent[i] = r.msg_id
            if i == 19:
                time.sleep(1.1)          # store times a whole second apart
                middle = int(time.time() * 1000)
                time.sleep(0.05)
    groups = {sent[i].split(":")[0] for i in range(40)}
    assert groups == {"broker-a", "broker-b"}, "the sends went to both groups"

    on_master = PullConsumer("q", zookeeper=zk, cluster=cl, read_from="master")
    found = on_master.query_by_key("Orders", "order-3")
    assert [m.body for m in found] == [b"m33", b"m23", b"m13", b"m3"]      # newest first
    assert [m.msg_id for m in found] == [sent[33], sent[23], sent[13], sent[3]]
    assert [m.body for m in on_master.query_by_key("Orders", "order-3", begin_ms=middle)] == \
        [b"m33", b"m23"]
    assert [m.body for m in on_master.query_by_key("Orders", "order-3", end_ms=middle)] == \
        [b"m13", b"m3"]
    assert len(on_master.query_by_key("Orders", "batch-2")) == 10
    assert len(on_master.query_by_key("Orders", "batch-2", max_num=3)) == 3
    assert on_master.query_by_key("Orders", "order-99") == []
    with pytest.raises(BadRequestError, match="without spaces"):
        on_master.query_by_key("Orders", "two words")

    # the CLI
    rows = [json.loads(line) for line in
            cli(local_cluster, "message", "find", "--topic", "Orders", "--key", "order-7",
                "--json").stdout.splitlines()]
    assert [r["body"] for r in rows] == ["m37", "m27", "m17", "m7"]
    assert rows[0]["keys"] == "order-7 batch-3"
    text = cli(local_cluster, "message", "find", "--topic", "Orders", "--key", "order-7",
               "--begin", "1h", "--max", "2").stdout
    assert "2 message(s)" in text and "m37" in text and "m17" not in text
    bad = cli(local_cluster, "message", "find", "--topic", "Nope", "--key", "k", ok=False)
    assert bad.returncode == 2 and "Nope" in bad.stderr

    # broker-a's slave built its own index from the replicated log
    wait_slaves_hold(zk, cl, "Orders")
    status, error, resp = on_master.remoting.call(
        a1.address, pb.QUERY_BY_KEY, pb.QueryByKeyRequest(topic="Orders", key="order-3"), 5)
    assert status == pb.OK, error
    on_a = [m.msg_id for m in decode_records(resp.records, "broker-a")]
    assert on_a == [m.msg_id for m in found if m.broker_group == "broker-a"] and on_a
    a0.kill()
    wait_for(lambda: master_of(on_master, "broker-a") == a1.address,
             what="broker-a's slave to take over")
    after = on_master.query_by_key("Orders", "order-3")
    assert [m.msg_id for m in after] == [m.msg_id for m in found]
    on_master.close()


def master_of(client, group):
    try:
        return client.master_address(group)
    except NoRouteError:
        return None
