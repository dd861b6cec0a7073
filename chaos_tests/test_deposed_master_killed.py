"""A master cut off ZooKeeper past its session, deposed, back as a slave,
then killed -9 and left dead: the producers ack again at once and go on
acking while it stays dead (issue 68's last liveness failure, end to end:
the random campaign's rounds 11-13 stalled 68 s because the deposed master,
back on a new session, took its successor's route and its death a round
later took the route along). The cut is real (iptables on the old master's
process only, cgroup-matched), the kill is SIGKILL, its session is left to
expire while the producers send. The interleaving that lost the route is
forced in tests/coordinator/test_route_ownership.py (the registry's lock
held); this test walks the whole story with real processes, every send
checked while the old master stays dead."""

import time

import pytest

from duomq.client import Message, Producer, SendStatus
from duomq.coordinator.nodes import Role
from duomq.drill.netfilter import zookeeper_ports
from duomq.testing.harness import isr_members, master_id, member_node, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PAIR = dict(flush="SYNC_FLUSH", replication="SYNC", zk_session_timeout_ms=4000,
            slave_timeout_ms=1000, sync_flush_timeout_ms=1000, segment_size_bytes=1 << 20,
            max_message_bytes=64 << 10, max_pull_bytes=1 << 20, ha_heartbeat_ms=500)
SILENT_S = 3 * 0.5                               # a slave this silent leaves the ISR
ACKED = {SendStatus.SEND_OK.name, SendStatus.SLAVE_NOT_AVAILABLE.name}
STORED = {SendStatus.FLUSH_SLAVE_TIMEOUT.name, SendStatus.FLUSH_DISK_TIMEOUT.name}


def send_for(p: Producer, topic: str, seconds: float, tag: str) -> list[tuple[float, float, str]]:
    """Send one message after another for ``seconds``: (started, took, status)
    of each, a failure recorded as its error's name."""
    out: list[tuple[float, float, str]] = []
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        t0 = time.monotonic()
        try:
            r = p.send(Message(topic, b"%s %d" % (tag.encode(), i)))
            status = r.status.name
        except Exception as exc:                 # noqa: BLE001 - recorded, asserted on below
            status = type(exc).__name__
        out.append((t0, time.monotonic() - t0, status))
        i += 1
    return out


def test_a_deposed_master_killed_after_it_rejoined_leaves_the_route_to_its_successor(
        local_cluster, netfilter):
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    old = local_cluster.add_broker("broker-a", 0, **PAIR)
    new = local_cluster.add_broker("broker-a", 1, **PAIR)
    local_cluster.create_topic("Deposed", queues=2)
    with Producer(zookeeper=zk, cluster=cl, send_timeout_ms=3000) as p:
        wait_for(lambda: isr_members(zk, cl) == {0, 1}, what="the slave in the ISR")
        wait_for(lambda: p.send(Message("Deposed", b"probe")).ok, what="SYNC acks")
        netfilter.isolate(old.pid, zookeeper_ports(zk), "old-master")
        wait_for(lambda: master_id(zk, cl) == 1, timeout_s=30, what="the slave to take over")
        netfilter.heal()
        wait_for(lambda: (m := member_node(zk, cl, "broker-a", 0)) is not None
                 and m.role is Role.SLAVE, timeout_s=30, what="the old master back as a slave")
        wait_for(lambda: isr_members(zk, cl) == {0, 1}, timeout_s=30,
                 what="the old master in sync again")
        assert new.alive()
        old.kill()
        killed = time.monotonic()
        sent = send_for(p, "Deposed", 12.0, "after")     # 3x past its 4 s session
    failed = [s for s in sent if s[2] not in ACKED | STORED]
    assert not failed, failed[:5]                # never refused, never unrouted
    acks = [t0 + took - killed for t0, took, status in sent if status in ACKED]
    assert acks, sent[:5]
    gaps = [b - a for a, b in zip(acks, acks[1:], strict=False)]
    worst = max(gaps, default=0.0)
    print(f"{len(sent)} sends in 12 s after the kill ({len(sent) - len(acks)} stored without a "
          f"slave's confirmation), first acked {acks[0]:.2f} s after it, widest gap between "
          f"acks {worst:.2f} s")
    assert acks[0] < SILENT_S + 1.5, acks[0]     # the dead slave leaves the ISR, then acks
    assert worst < 2.0, worst                    # its session ends at ~4 s: no stall then
    assert acks[-1] > 10.0                       # still acking well after its session ended
    assert master_id(zk, cl) == 1 and not old.alive()
