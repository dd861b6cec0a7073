"""A SYNC_FLUSH + SYNC pair's master killed, read back before anything is
restarted (issue 68): every SEND_OK message is readable the moment the new
master serves, also when the slave never learnt it was acked (the interleaving
forced: the master stops telling its slave the confirmed offset, then acks
more, then dies); and the lone master goes on delivering what it re-writes
of acked data (delayed messages come due, a transaction committed after the
kill, retries, a share group's receives and acks) and shows what it stores
of new sends (SLAVE_NOT_AVAILABLE: stored and readable)."""

import subprocess
import sys
import time

import pytest

from duomq.client import (
    Message,
    Producer,
    PullConsumer,
    PushConsumer,
    SendStatus,
    SimpleConsumer,
    TransactionProducer,
    TransactionState,
)
from duomq.client.remoting import RemotingClient
from duomq.proto import pb
from duomq.testing.harness import isr_members, master_id, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PAIR = dict(flush="SYNC_FLUSH", replication="SYNC", zk_session_timeout_ms=4000,
            slave_timeout_ms=1000, sync_flush_timeout_ms=1000, segment_size_bytes=1 << 20,
            max_message_bytes=64 << 10, max_pull_bytes=1 << 20,
            message_delay_level="1s 3s 4s 5s 6s")


def confirmed(address: str) -> int:
    r = RemotingClient("confirmed-probe")
    try:
        st, err, resp = r.call(address, pb.BROKER_STATUS, pb.BrokerStatusRequest(), 5)
        assert st == pb.OK, err
        return resp.confirmed_offset
    finally:
        r.close()


def read_all(zk, cl, topic, group="audit") -> dict[bytes, int]:
    """Every message of ``topic`` a new group reads from the first offset:
    body -> times read."""
    out: dict[bytes, int] = {}
    with PullConsumer(group, zookeeper=zk, cluster=cl) as c:
        for mq in c.queues(topic):
            off = 0
            while (r := c.pull(mq, off, 256)).messages:
                for m in r.messages:
                    out[bytes(m.body)] = out.get(bytes(m.body), 0) + 1
                off = r.next_offset
    return out


def eventually_read(zk, cl, topic, want: set[bytes], within_s: float) -> dict[bytes, int]:
    """Read back until ``want`` is all there or ``within_s`` ran out; what
    was read last (the caller asserts on it)."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            got = read_all(zk, cl, topic)
        except Exception:                 # the route to the new master is still moving
            got = {}
        if want <= set(got) or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def test_acked_records_a_slave_was_never_told_of_are_readable_once_it_serves(local_cluster,
                                                                               tmp_path):
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    hold = tmp_path / "hold-confirmed"
    old = local_cluster.add_broker("broker-a", 0, env={"DUOMQ_FAULT_HOLD_CONFIRMED": str(hold)},
                                   **PAIR)
    new = local_cluster.add_broker("broker-a", 1, **PAIR)
    local_cluster.create_topic("Acks", queues=2)
    with Producer(zookeeper=zk, cluster=cl, send_timeout_ms=3000) as p:
        wait_for(lambda: isr_members(zk, cl) == {0, 1}, what="the slave in the ISR")
        wait_for(lambda: p.send(Message("Acks", b"probe")).ok, what="SYNC acks")
        before = [p.send(Message("Acks", b"before %d" % i)) for i in range(20)]
        wait_for(lambda: confirmed(new.address) >= confirmed(old.address), what="the slave told")
        hold.touch()                      # from now on the slave is told nothing new
        time.sleep(0.2)
        after = [p.send(Message("Acks", b"after %d" % i)) for i in range(20)]
    assert all(r.status is SendStatus.SEND_OK for r in before + after)
    last = after[-1]
    # the interleaving happened: the slave holds acked records past what it may show
    assert confirmed(new.address) <= after[0].physical_offsets[0] < confirmed(old.address)
    old.kill()
    wait_for(lambda: master_id(zk, cl) == 1, what="the slave to take over")
    want = {b"probe"} | {b"before %d" % i for i in range(20)} | {b"after %d" % i for i in range(20)}
    got = eventually_read(zk, cl, "Acks", want, 10)      # the old master is never restarted
    assert want - set(got) == set(), sorted(want - set(got))[:5]
    shown = subprocess.run([sys.executable, "-m", "duomq", "message", "get", last.msg_id,
                            "--zookeeper", zk, "--cluster", cl], capture_output=True, text=True,
                           timeout=60)
    assert shown.returncode == 0 and "after 19" in shown.stdout, shown.stdout + shown.stderr


def test_a_lone_master_delivers_what_it_rewrites_and_shows_what_it_stores(local_cluster):
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    old = local_cluster.add_broker("broker-a", 0, **PAIR)
    second = local_cluster.add_broker("broker-a", 1, **PAIR)
    for topic in ("Plain", "Timers", "Tx", "Retried", "Shared"):
        local_cluster.create_topic(topic, queues=2)
    p = Producer(zookeeper=zk, cluster=cl, send_timeout_ms=3000)
    try:
        wait_for(lambda: isr_members(zk, cl) == {0, 1}, what="the slave in the ISR")
        wait_for(lambda: p.send(Message("Plain", b"probe")).ok, what="SYNC acks")
        acked = [p.send(Message("Plain", b"plain %d" % i)) for i in range(10)]
        acked += [p.send(Message("Timers", b"timer %d" % i, delay_level=2)) for i in range(10)]
        acked += [p.send(Message("Shared", b"share %d" % i)) for i in range(10)]
        acked += [p.send(Message("Retried", b"retry me"))]
        assert all(r.status is SendStatus.SEND_OK for r in acked), acked
        killed = []

        def commit_after_the_kill(msg, arg):      # the half message acked by the pair
            old.kill()
            killed.append(time.monotonic())
            wait_for(lambda: master_id(zk, cl) == 1, what="the slave to take over")
            return TransactionState.COMMIT

        with TransactionProducer("txg", zookeeper=zk, cluster=cl, send_timeout_ms=3000) as tp:
            done = tp.send_in_transaction(Message("Tx", b"committed alone"),
                                          commit_after_the_kill)
        assert done.local_state is TransactionState.COMMIT and not done.error, done
        # the lone master: every acked message readable, timers come due
        want = {b"plain %d" % i for i in range(10)}
        assert want <= set(eventually_read(zk, cl, "Plain", want, 10))
        timers = {b"timer %d" % i for i in range(10)}
        got = eventually_read(zk, cl, "Timers", timers, 20)
        assert timers <= set(got), sorted(timers - set(got))
        assert b"committed alone" in eventually_read(zk, cl, "Tx", {b"committed alone"}, 10)
        # a new send: stored, answered SLAVE_NOT_AVAILABLE, and readable
        alone = p.send(Message("Plain", b"sent alone"))
        assert alone.status is SendStatus.SLAVE_NOT_AVAILABLE, alone
        assert b"sent alone" in eventually_read(zk, cl, "Plain", {b"sent alone"}, 5)
    finally:
        p.close()
    # a share group receives and acks on it
    with SimpleConsumer("sharers", subscriptions="Shared", zookeeper=zk, cluster=cl,
                        consume_from="first") as sc:
        seen: set[bytes] = set()
        deadline = time.monotonic() + 20
        while len(seen) < 10 and time.monotonic() < deadline:
            got = sc.receive(16, wait_ms=1000)
            sc.ack(got)
            seen |= {bytes(m.body) for m in got}
    assert seen == {b"share %d" % i for i in range(10)}
    # a failed message comes back through the group's retry topic
    deliveries = []

    def fail_once(m):
        deliveries.append(m.reconsume_times)
        if len(deliveries) == 1:
            raise RuntimeError("failed on purpose: retried")

    c = PushConsumer("retriers", topic="Retried", on_message=fail_once, zookeeper=zk, cluster=cl,
                     consume_from="first").start()
    try:
        wait_for(lambda: len(deliveries) >= 2, 30, "the retry to come back")
    finally:
        c.shutdown()
    assert deliveries[:2] == [0, 1]
    assert master_id(zk, cl) == 1 and isr_members(zk, cl) == {1}   # alone all along
    assert time.monotonic() - killed[0] < 90
    # the old master rejoins as a slave under load: it is listed only holding what
    # the lone master showed, SYNC acks come back, and the lone master's records
    # survive a second failover to it
    old.start()
    with Producer(zookeeper=zk, cluster=cl, send_timeout_ms=3000) as p:
        wait_for(lambda: p.send(Message("Plain", b"acked again")).status is SendStatus.SEND_OK,
                 30, "SYNC acks again")
    assert isr_members(zk, cl) == {0, 1}
    second.kill()
    wait_for(lambda: master_id(zk, cl) == 0, what="the old master to take over again")
    want = {b"plain %d" % i for i in range(10)} | {b"sent alone", b"acked again"}
    got = eventually_read(zk, cl, "Plain", want, 10)
    assert want <= set(got), sorted(want - set(got))
    assert timers <= set(eventually_read(zk, cl, "Timers", timers, 10))
    assert b"committed alone" in eventually_read(zk, cl, "Tx", {b"committed alone"}, 10)
