"""Lookups while a group's master is dead and nobody takes over (issue 68,
item 1: what was acked is readable through ``message get`` too, before
anything is restarted). A SYNC_FLUSH + SYNC pair whose slave may not be
promoted (a read replica): after a kill -9 of the master, every acked
message is found by its id and by its key, through the client and the CLI,
from the slave, both while the dead master's node is still in ZooKeeper
(its session not yet expired) and after; the master is never restarted."""

import time

import pytest

from duomq.client import Message, Producer, PullConsumer, SendStatus
from duomq.client.remoting import RemotingClient
from duomq.proto import pb
from duomq.testing.harness import isr_members, master_id, run_cli, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PAIR = dict(flush="SYNC_FLUSH", replication="SYNC", zk_session_timeout_ms=6000,
            slave_timeout_ms=1000, sync_flush_timeout_ms=1000)


def confirmed(address: str) -> int:
    """What the broker lets readers see (a slave: what its master told it)."""
    r = RemotingClient("confirmed-probe")
    try:
        st, err, resp = r.call(address, pb.BROKER_STATUS, pb.BrokerStatusRequest(), 5)
        assert st == pb.OK, err
        return resp.confirmed_offset
    finally:
        r.close()


def test_every_acked_message_is_found_by_id_and_key_on_the_slave_while_the_master_is_dead(
        local_cluster):
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    master = local_cluster.add_broker("broker-a", 0, **PAIR)
    replica = local_cluster.add_broker("broker-a", 1, promotable="false", **PAIR)
    local_cluster.create_topic("Looked", queues=2)
    with Producer(zookeeper=zk, cluster=cl, send_timeout_ms=3000) as p:
        wait_for(lambda: isr_members(zk, cl) == {0, 1}, what="the slave in the ISR")
        wait_for(lambda: p.send(Message("Looked", b"probe")).ok, what="SYNC acks")
        acked = [p.send(Message("Looked", b"order %d" % i, keys=f"order-{i}"))
                 for i in range(12)]
    assert all(r.status is SendStatus.SEND_OK for r in acked), acked
    # a replica shows what its master confirmed (records it holds past that
    # may be cut by a later master; a promoted slave shows them all:
    # test_read_your_acks): the kill comes once it was told
    wait_for(lambda: confirmed(replica.address) > acked[-1].physical_offsets[0],
             what="the replica told of the last ack")
    master.kill()
    killed = time.monotonic()
    with PullConsumer("lookups", zookeeper=zk, cluster=cl, request_timeout_ms=2000) as c:
        # the dead master's node is still there: its session has not expired
        assert master_id(zk, cl) == 0
        first = acked[0]
        got = c.get_message(first.msg_id)
        assert bytes(got.body) == b"order 0"
        took = time.monotonic() - killed
        assert master_id(zk, cl) == 0, "looked up only after the dead master's node went"
        for i, r in enumerate(acked):
            assert bytes(c.get_message(r.msg_id).body) == b"order %d" % i
        found = c.query_by_key("Looked", "order-7")
        assert [bytes(m.body) for m in found] == [b"order 7"]
    shown = run_cli("message", "get", acked[-1].msg_id, "--zookeeper", zk, "--cluster", cl,
                    check=False, timeout_s=60)
    assert shown.returncode == 0 and "order 11" in shown.stdout, shown.stdout + shown.stderr
    assert took < 6, f"the first lookup took {took:.1f} s"
