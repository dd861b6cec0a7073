"""A replication link cut without a reset (iptables drops its packets, on
127.0.0.1, as root; removed after) comes back soon after the heal: the dead
connection is closed and dialled again (libzmq's ZMTP heartbeats, or a
native link's own watch of the master's heartbeats and of its dial),
instead of the stream waiting out TCP's retransmission backoff; the
master's new link replaces the stale one at once."""

import operator
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from duomq.client import Message, Producer
from duomq.drill.load import Workload
from duomq.testing.harness import isr_members, wait_for, wait_slaves_hold

pytestmark = [pytest.mark.integration, pytest.mark.slow]
SYNC = dict(flush="SYNC_FLUSH", replication="SYNC")


@pytest.mark.parametrize("ha_transport", ["native", "zeromq"])
def test_a_cut_replication_link_resumes_soon_after_the_heal(local_cluster, netfilter,
                                                            ha_transport):
    master = local_cluster.add_broker("broker-a", 0, ha_transport=ha_transport, **SYNC)
    slave = local_cluster.add_broker("broker-a", 1, ha_transport=ha_transport, **SYNC)
    local_cluster.create_topic("Link", queues=2)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    with Producer(zookeeper=zk, cluster=cl) as p:
        wait_for(lambda: p.send(Message("Link", b"warm")).ok, 20, "the pair to ack")
    wait_for(lambda: isr_members(zk, cl) == {0, 1}, 15, "the slave in sync")
    load = Workload(zk, cl, "Link", producers=2, consumers=0).start()
    try:
        wait_for(lambda: load.acked() >= 100, 20, "acked load")
        netfilter.cut_port(master.ha_port)
        time.sleep(5.0)
        netfilter.heal()
        healed = time.monotonic()
        wait_for(lambda: load.first_ack_after(healed) is not None, 15, "SEND_OK after the heal")
        resumed = load.first_ack_after(healed) - healed
    finally:
        load.stop()
    print(f"a 5 s cut of the replication link ({ha_transport}): SEND_OK again "
          f"{resumed:.2f} s after the heal")
    assert resumed < 1.2            # 1.8 s without the heartbeats
    assert "replaced by a new connection" in master.log_tail(300)
    if ha_transport == "native":    # the link's own watch saw the silence
        assert "silent for" in slave.log_tail(300)


def test_a_native_link_lives_on_its_own_pings_whatever_the_masters_heartbeat(local_cluster):
    """The slave watches the link with its own ha_heartbeat_ms (200 ms: a
    PING after 100 quiet ms, closed after 400), while the master sends its
    heartbeat only every 2 s: the PONGs keep the connection; idle for 3 s,
    it is never dialled again."""
    master = local_cluster.add_broker("broker-a", 0, ha_heartbeat_ms=2000, **SYNC)
    slave = local_cluster.add_broker("broker-a", 1, ha_heartbeat_ms=200, **SYNC)
    local_cluster.create_topic("Idle", queues=1)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    with Producer(zookeeper=zk, cluster=cl) as p:
        wait_for(lambda: p.send(Message("Idle", b"warm")).ok, 20, "the pair to ack")
        time.sleep(3.0)
        assert p.send(Message("Idle", b"after the idle spell")).ok
    assert "silent for" not in slave.log_tail(300)
    assert "replaced by a new connection" not in master.log_tail(300)


def links_lost(broker) -> float:
    """The slave's ``duomq_replication_links_lost_total``, scraped."""
    url = f"http://127.0.0.1:{broker.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    return next(s.value for fam in text_string_to_metric_families(text) for s in fam.samples
                if s.name == "duomq_replication_links_lost_total")


def test_a_master_stalled_past_two_heartbeats_answers_every_send_and_loses_none(local_cluster):
    """The fault the drills lack: the master's serving thread, which now
    answers the native link's PINGs itself (libzmq's I/O thread did), stops
    (SIGSTOP) for five of the slave's heartbeats. The slave finds the link
    silent, closes it and dials again (counted in its metrics). Once the
    master resumes, every send is answered at once and SEND_OK: the master
    does not count the time it was stopped as its slave's silence (which
    would suspend the link and answer SLAVE_NOT_AVAILABLE until the new
    link's first report), and the slave holds everything the master stored."""
    beat = dict(ha_heartbeat_ms=300, **SYNC)
    master = local_cluster.add_broker("broker-a", 0, **beat)
    slave = local_cluster.add_broker("broker-a", 1, **beat)
    local_cluster.create_topic("Stall", queues=2)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    with Producer(zookeeper=zk, cluster=cl) as p:
        warm = []                  # a send before the slave is in sync is stored too
        wait_for(lambda: warm.append(p.send(Message("Stall", b"warm")).status.name)
                 or warm[-1] == "SEND_OK", 20, "the pair to ack")
        assert set(warm) <= {"SEND_OK", "SLAVE_NOT_AVAILABLE"}, warm
        wait_for(lambda: isr_members(zk, cl) == {0, 1}, 15, "the slave in sync")
        assert links_lost(slave) == 0
        master.suspend()
        try:
            wait_for(lambda: "silent for" in slave.log_tail(300), 5, "the slave to re-dial")
        finally:
            master.resume()
        resumed = time.monotonic()
        answers = []                            # (status, seconds after the resume)
        while not answers or answers[-1][1] < 2.0:
            status = p.send(Message("Stall", b"%d" % len(answers))).status.name
            answers.append((status, time.monotonic() - resumed))
            time.sleep(0.005)
    assert {s for s, _ in answers} == {"SEND_OK"}, [a for a in answers if a[0] != "SEND_OK"]
    assert "not counted as its slaves' silence" in master.log_tail(300)
    times = [0.0] + [t for _, t in answers]
    assert max(map(operator.sub, times[1:], times)) < 1.0          # none waited
    assert links_lost(slave) >= 1
    assert wait_slaves_hold(zk, cl, "Stall") == len(warm) + len(answers)   # every one, on both
    print(f"a master stopped past two heartbeats: {len(answers)} sends after it resumed, "
          f"every one SEND_OK, the longest {max(map(operator.sub, times[1:], times)):.3f} s")
