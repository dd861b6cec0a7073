"""Master and slave as real processes: byte-identical logs, read-only slave
pulls, SYNC acks that never lie, offsets copied to the slave."""

import filecmp
import os
import subprocess
import sys
import time

import pytest

from duomq.client import Message, Producer, PullConsumer
from duomq.client.remoting import RemotingClient
from duomq.common.message import MessageQueue
from duomq.proto import pb
from duomq.testing.harness import wait_for

pytestmark = pytest.mark.integration




def status(remoting, broker):
    st, err, resp = remoting.call(broker.address, pb.BROKER_STATUS, pb.BrokerStatusRequest(), 5)
    assert st == pb.OK, err
    return resp


def pull(remoting, broker, topic, qid, offset, n=1000, group="g"):
    return remoting.call(broker.address, pb.PULL, pb.PullRequest(
        consumer_group=group, topic=topic, queue_id=qid, queue_offset=offset, max_messages=n), 5)


def segments(broker):
    d = os.path.join(broker.data_dir, "store", "commitlog")
    return sorted(os.listdir(d)), d


@pytest.fixture
def remoting():
    r = RemotingClient("test-io")
    yield r
    r.close()


@pytest.mark.parametrize("master_end, slave_end", [
    ("native", "native"), ("zeromq", "zeromq"), ("zeromq", "native"), ("native", "zeromq")])
def test_async_slave_holds_a_byte_identical_log_and_serves_reads(local_cluster, small_store,
                                                                 remoting, master_end, slave_end):
    """Over both kinds of replication link, and each end of one kind to the
    other's (a rolling upgrade): the threads' own ZMTP (chunks of 1 MiB
    written and read in parts as the kernel takes them), libzmq's."""
    master = local_cluster.add_broker("broker-a", 0, ha_transport=master_end, **small_store)
    slave = local_cluster.add_broker("broker-a", 1, ha_transport=slave_end, **small_store)
    local_cluster.create_topic("Copied", queues=2)
    with Producer(zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster) as p:
        for i in range(60):
            assert p.send_batch([Message("Copied", b"m%03d-%03d" % (i, k) * 40, tags="t")
                                 for k in range(100)]).ok
    m_end = status(remoting, master).max_physical_offset
    assert m_end > 2 * (1 << 20)                     # several 1 MiB segments
    wait_for(lambda: status(remoting, slave).max_physical_offset == m_end, what="the slave")
    s_status = status(remoting, slave)
    assert s_status.role == "SLAVE" and s_status.master_address == master.address
    (m_names, m_dir), (s_names, s_dir) = segments(master), segments(slave)
    assert m_names == s_names
    assert all(filecmp.cmp(os.path.join(m_dir, n), os.path.join(s_dir, n), shallow=False)
               for n in m_names)
    # reads from the slave give what the master gives
    for qid in (0, 1):
        a, b = pull(remoting, master, "Copied", qid, 0), pull(remoting, slave, "Copied", qid, 0)
        assert a[0] == b[0] == pb.OK and a[2].records == b[2].records
    # writes and offset commits are the master's
    st, err, _ = remoting.call(slave.address, pb.SEND, pb.SendRequest(topic="Copied", count=1,
                                                                     records=b""), 5)
    assert st == pb.NOT_MASTER and master.address in err
    st, err, _ = remoting.call(slave.address, pb.COMMIT_OFFSET, pb.CommitOffsetRequest(
        consumer_group="g", offsets=[pb.QueueOffset(topic="Copied", queue_id=0, offset=5)]), 5)
    assert st == pb.NOT_MASTER
    m_status = status(remoting, master)
    assert [r.broker_id for r in m_status.replicas] == [1]
    assert m_status.replicas[0].state == "TRANSFER"


def test_a_slave_that_stops_reading_holds_up_no_send_and_catches_up(local_cluster, small_store,
                                                                    remoting):
    """The native replication port against a SIGSTOPped slave (ASYNC): its
    queue fills (16 chunks, then the kernel's buffers) and the serving thread
    writes no more to it, but goes on acking every send at once; resumed,
    the slave gets the rest from where it stopped, byte for byte."""
    master = local_cluster.add_broker("broker-a", 0, ha_transport="native", **small_store)
    slave = local_cluster.add_broker("broker-a", 1, ha_transport="native", **small_store)
    local_cluster.create_topic("Stalled", queues=2)
    with Producer(zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster) as p:
        assert p.send(Message("Stalled", b"warm")).ok
        wait_for(lambda: status(remoting, slave).max_physical_offset ==
                 status(remoting, master).max_physical_offset, what="the slave")
        slave.suspend()
        try:
            slowest = 0.0
            for i in range(120):              # ~24 MiB: past what the link can hold
                t = time.monotonic()
                assert p.send_batch([Message("Stalled", b"s%03d-%03d" % (i, k) * 500)
                                     for k in range(50)]).ok
                slowest = max(slowest, time.monotonic() - t)
            assert slowest < 1.0, f"a send took {slowest:.2f} s with the slave stopped"
            m_end = status(remoting, master).max_physical_offset
            assert m_end > 20 << 20
        finally:
            slave.resume()
    wait_for(lambda: status(remoting, slave).max_physical_offset == m_end, 30,
             what="the slave to catch up")
    (m_names, m_dir), (s_names, s_dir) = segments(master), segments(slave)
    assert m_names == s_names
    assert all(filecmp.cmp(os.path.join(m_dir, n), os.path.join(s_dir, n), shallow=False)
               for n in m_names)


def test_slave_copies_consumer_offsets_from_the_master(local_cluster, small_store, remoting):
    local_cluster.add_broker("broker-a", 0, offset_persist_interval_ms=200, **small_store)
    slave = local_cluster.add_broker("broker-a", 1, offset_persist_interval_ms=200, **small_store)
    local_cluster.create_topic("Offsets", queues=1)
    mq = MessageQueue("Offsets", "broker-a", 0)
    with Producer(zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster) as p, \
            PullConsumer("copied", zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster) as c:
        p.send_batch([Message("Offsets", b"x")] * 10)
        c.commit({mq: 7})
        wait_for(lambda: any(o.consumer_group == "copied" and o.offset == 7
                             for o in status(remoting, slave).group_offsets),
                 what="the slave to copy the offset")


def thread_priorities(pid: int) -> dict[int, tuple[str, int]]:
    """Each thread's (scheduling policy, nice value): fields 41 and 19 of
    /proc/<pid>/task/<tid>/stat."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        policy = {os.SCHED_OTHER: "other", os.SCHED_IDLE: "idle"}.get(int(fields[38]), fields[38])
        out[int(tid)] = (policy, int(fields[16]))
    return out


ZEROMQ_LINK = {"ha_transport": "zeromq"}


@pytest.mark.parametrize("replication,settings,lowered,threads", [
    ("ASYNC", {}, ("idle", 0), 1),
    ("ASYNC", ZEROMQ_LINK, ("idle", 0), 3),
    ("ASYNC", {"ha_apply_idle": False}, ("other", 10), 1),
    ("ASYNC", {"ha_apply_idle": False, **ZEROMQ_LINK}, ("other", 10), 3),
    ("ASYNC", {"ha_apply_idle": False, "ha_apply_nice": 0}, None, 0),
    ("SYNC", {}, None, 0),
])
def test_async_replication_applies_the_log_at_a_lower_priority(local_cluster, small_store,
                                                               remoting, replication, settings,
                                                               lowered, threads):
    """Under ASYNC replication the slave's replication thread (and, on a
    libzmq link, its ZeroMQ I/O and reaper threads; a native link has none)
    runs under SCHED_IDLE, or ha_apply_nice nicer; the serving thread and the
    rest keep the broker's priority. Under SYNC every ack waits on them: no
    change."""
    master = local_cluster.add_broker("broker-a", 0, replication=replication, **small_store)
    slave = local_cluster.add_broker("broker-a", 1, replication=replication, **small_store,
                                     **settings)
    local_cluster.create_topic("Nice", queues=1)
    with Producer(zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster) as p:
        # SYNC: acked once the slave is in sync and ZooKeeper's in-sync set lists it
        wait_for(lambda: p.send(Message("Nice", b"x")).ok, what="an acked send")
    if lowered:
        wait_for(lambda: sum(v == lowered for v in thread_priorities(slave.pid).values())
                 >= threads, what=f"the replication thread (and I/O, reaper) at {lowered}")
    else:   # the thread has run: it copied the send
        end = status(remoting, master).max_physical_offset
        wait_for(lambda: status(remoting, slave).max_physical_offset == end, what="the slave")
    prio = thread_priorities(slave.pid)
    assert prio[slave.pid] == ("other", 0)            # the serving thread
    assert sum(v == lowered for v in prio.values()) == threads
    assert all(v == ("other", 0) for v in prio.values() if v != lowered)


@pytest.mark.parametrize("settings", [{}, ZEROMQ_LINK])
def test_a_slave_starved_under_sched_idle_is_lifted_and_catches_up(local_cluster, small_store,
                                                                   remoting, settings):
    """SCHED_IDLE gets no CPU while every core is busy: busy loops on the
    slave's CPU starved a replication thread for 35 s on a loaded machine
    (it could not report for a hand-over). The serving thread sees the link
    go without a turn and lifts it (and libzmq's threads) to ha_apply_nice:
    the slave catches up with the loop still running."""
    master = local_cluster.add_broker("broker-a", 0, replication="ASYNC", **small_store)
    slave = local_cluster.add_broker("broker-a", 1, replication="ASYNC", **small_store,
                                     **settings)
    local_cluster.create_topic("Starved", queues=1)
    cpu = max(os.sched_getaffinity(0))
    with Producer(zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster) as p:
        wait_for(lambda: p.send(Message("Starved", b"x")).ok, what="an acked send")
        end = status(remoting, master).max_physical_offset
        wait_for(lambda: status(remoting, slave).max_physical_offset == end, what="the slave")
        assert sum(v[0] == "idle" for v in thread_priorities(slave.pid).values()) >= 1
        for tid in os.listdir(f"/proc/{slave.pid}/task"):      # the slave's threads on one CPU
            os.sched_setaffinity(int(tid), {cpu})
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                 preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
                for _ in range(3)]         # the serving thread gets a quarter of the CPU
        try:
            time.sleep(0.3)
            for _ in range(10):
                assert p.send_batch([Message("Starved", b"y" * 1000)] * 200).ok
            end = status(remoting, master).max_physical_offset
            wait_for(lambda: status(remoting, slave).max_physical_offset == end, 15,
                     "the starved slave to catch up while the CPU stays busy")
            assert "had no turn for" in slave.log_tail(50)
        finally:
            for b in busy:
                b.kill()
                b.wait()
    prio = thread_priorities(slave.pid)
    assert not any(v[0] == "idle" for v in prio.values())
    assert prio[slave.pid] == ("other", 0)
    assert sum(v == ("other", 10) for v in prio.values()) == (3 if settings else 1)


@pytest.mark.parametrize("replication", ["ASYNC", "SYNC"])
def test_a_slaves_store_has_one_writer_while_retention_deletes_under_traffic(
        local_cluster, small_store, remoting, replication):
    """Issue 68: no thread but one writes a store. On a slave it is the
    replication thread while it runs: it appends and dispatches, and the
    serving thread posts it retention's deletes (it deleted them itself
    before, on the same store the replication thread was writing). The
    store refuses a write from any other thread (``store/one_writer.py``),
    so a write left on the serving thread would fail here, loudly."""
    expiring = dict(small_store, file_reserved_hours=0.0001, retention_check_interval_ms=200,
                    retention_wait_for_consumers=False)
    master = local_cluster.add_broker("broker-a", 0, replication=replication, **expiring)
    slave = local_cluster.add_broker("broker-a", 1, replication=replication, **expiring)
    local_cluster.create_topic("One", queues=2)
    with Producer(zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster) as p:
        wait_for(lambda: p.send(Message("One", b"x")).ok, what="an acked send")
        for i in range(40):
            assert p.send_batch([Message("One", b"%03d-%03d" % (i, k) * 300)
                                 for k in range(50)]).ok
    end = status(remoting, master).max_physical_offset
    wait_for(lambda: status(remoting, slave).max_physical_offset == end, what="the slave")
    wait_for(lambda: status(remoting, slave).min_physical_offset > 0, 20,
             what="retention to delete a segment on the slave")
    tail = slave.log_tail(3000)
    assert "only the thread that started the store" not in tail
    assert "retention failed" not in tail and "failed" not in tail.lower(), tail[-2000:]
    assert slave.alive()


def test_an_async_transfer_lingers_then_leaves_with_no_more_traffic(local_cluster, small_store,
                                                                    remoting):
    """ha_linger_ms in real brokers: a lone ASYNC send's bytes reach the
    slave no sooner than the linger (nothing waits on them), and then with
    nothing else sent: the master's loop comes back for them by itself."""
    master = local_cluster.add_broker("broker-a", 0, ha_linger_ms=100, **small_store)
    slave = local_cluster.add_broker("broker-a", 1, ha_linger_ms=100, **small_store)
    local_cluster.create_topic("Linger", queues=1)
    with Producer(zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster) as p:
        assert p.send(Message("Linger", b"warm")).ok
        warm_end = status(remoting, master).max_physical_offset
        wait_for(lambda: status(remoting, slave).max_physical_offset == warm_end,
                 what="the slave to hold the first message")
        t0 = time.monotonic()
        assert p.send(Message("Linger", b"one")).ok
        end = status(remoting, master).max_physical_offset
        early = status(remoting, slave).max_physical_offset
        if time.monotonic() - t0 < 0.09:
            assert early == warm_end, "sent before its linger was up"
        wait_for(lambda: status(remoting, slave).max_physical_offset == end, timeout_s=5,
                 what="the lingering transfer, with no more traffic")
        assert time.monotonic() - t0 >= 0.095
