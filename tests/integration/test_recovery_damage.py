"""A broker whose log is damaged below data written later keeps that data in
quarantine, refuses to be master, and (when its group holds the data) fetches
it again and rejoins whole."""

import filecmp
import os

import pytest

from duomq.cli.status_cmd import collect
from duomq.client import Message, Producer
from duomq.coordinator.nodes import MemberNode
from duomq.format import record as rec
from duomq.testing.harness import master_id, master_info, member_node, wait_for

pytestmark = pytest.mark.integration

PAIR = dict(zk_session_timeout_ms=4000, election_settle_ms=200, segment_size_bytes=1 << 20,
            max_message_bytes=64 << 10, max_pull_bytes=1 << 20)


def commitlog(broker) -> str:
    return os.path.join(broker.data_dir, "store", "commitlog")


def damage_record(broker, index: int) -> int:
    """Flip the queue-id byte of the ``index``-th record; returns its offset."""
    path = os.path.join(commitlog(broker), sorted(os.listdir(commitlog(broker)))[0])
    with open(path, "r+b") as f:
        data = f.read()
        pos = 0
        for _ in range(index):
            pos += int.from_bytes(data[pos:pos + 4], "big")
        assert rec.check_record(data, pos, len(data)) > 0
        f.seek(pos + 15)
        f.write(bytes([data[pos + 15] ^ 0x40]))
    return pos


def send(local_cluster, n: int) -> None:
    with Producer(zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster) as p:
        for lo in range(0, n, 100):
            assert p.send_batch([Message("T", b"m%05d" % i) for i in range(lo, lo + 100)]).ok


def member(local_cluster, broker) -> MemberNode:
    node = member_node(local_cluster.zookeeper, local_cluster.cluster, broker.group,
                       broker.broker_id)
    return node if node is not None else MemberNode(broker.broker_id, promotable=False)


def test_a_lone_broker_with_damage_in_the_middle_will_not_be_master(local_cluster):
    b = local_cluster.add_broker("broker-a", 0, **PAIR)
    local_cluster.create_topic("T", queues=1)
    send(local_cluster, 1000)
    b.kill()
    damage_record(b, 300)
    b.start(wait=False)
    wait_for(lambda: member(local_cluster, b).recovery, what="the damage in its member node")
    info = member(local_cluster, b)
    assert info.promotable is False and "DAMAGE below data written later" in info.recovery
    assert os.listdir(os.path.join(b.data_dir, "store", "quarantine"))

    def said():
        with open(b.log_path) as f:
            return "HA: election: no live broker can take over" in f.read()
    wait_for(said, what="the election to find no broker that can take over")
    assert not master_info(local_cluster.zookeeper, local_cluster.cluster)
    (shown,) = collect(local_cluster.zookeeper, local_cluster.cluster)["brokers"]
    assert "DAMAGE below data written later" in shown["recovery"]      # `duomq status`


def test_a_damaged_old_master_refetches_from_its_group_and_rejoins_whole(local_cluster):
    old = local_cluster.add_broker("broker-a", 0, replication="SYNC", **PAIR)
    new = local_cluster.add_broker("broker-a", 1, replication="SYNC", **PAIR)
    local_cluster.create_topic("T", queues=1)
    send(local_cluster, 2000)
    old.kill()
    damage_record(old, 700)
    wait_for(lambda: master_id(local_cluster.zookeeper, local_cluster.cluster) == 1,
             what="broker 1 to take over")
    old.start(wait=False)
    # the node of the killed process outlives it until its session ends, and
    # says the same offset: the new process's node is the one to wait for
    wait_for(lambda: member(local_cluster, old).pid == old.pid
             and member(local_cluster, old).promotable is True
             and member(local_cluster, old).max_offset == member(local_cluster, new).max_offset,
             what="the old master to fetch the cut range again")
    assert "DAMAGE below data written later" in member(local_cluster, old).recovery
    send(local_cluster, 100)                       # and it follows on as a slave
    wait_for(lambda: member(local_cluster, old).max_offset ==
             member(local_cluster, new).max_offset, what="the slave to catch up")
    names = sorted(os.listdir(commitlog(new)))
    _match, mismatch, errors = filecmp.cmpfiles(commitlog(old), commitlog(new), names,
                                                shallow=False)
    assert not mismatch and not errors
