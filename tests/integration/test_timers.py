"""Timer messages against a real broker: any delivery time, delivered at it
and never before, the wheel resumed after kill -9 from its checkpoint
(the timers read again are the few past it, not every pending one)."""

import json
import os
import random
import re
import threading
import time

import pytest

from duomq.client import Message, Producer, PushConsumer, SendStatus
from duomq.testing.harness import wait_for

pytestmark = pytest.mark.integration


class Arrivals:
    def __init__(self):
        self.lock = threading.Lock()
        self.at: dict[bytes, list[float]] = {}

    def __call__(self, m):
        with self.lock:
            self.at.setdefault(m.body, []).append(time.time())


def consume(zk, cl, group, topic, arrivals):
    return PushConsumer(group, topic=topic, on_message=arrivals, zookeeper=zk, cluster=cl,
                        consume_from="first", consume_threads=0).start()


def lateness(arrivals, due):
    return sorted(min(arrivals.at[b]) - at for b, at in due.items())


def test_timers_at_random_times_come_at_their_time_and_never_early(local_cluster, small_store):
    """2,000 timers at random times over 60 s, and one in the past: each
    delivered once, none early, all within seconds (the figure of its lag is
    bench/timer_bench.py's)."""
    local_cluster.add_broker("broker-a", **small_store)
    local_cluster.create_topic("Timed", queues=2)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    arrivals, rng = Arrivals(), random.Random(70)
    c = consume(zk, cl, "timed", "Timed", arrivals)
    try:
        with Producer(zookeeper=zk, cluster=cl) as p:
            t0 = time.time()
            due = {b"t%04d" % i: t0 + 0.5 + rng.random() * 60 for i in range(2000)}
            items = list(due.items())
            for k in range(0, len(items), 50):
                p.send_batch([Message("Timed", b, deliver_at_ms=int(at * 1000))
                              for b, at in items[k:k + 50]])
            due[b"past"] = t0
            p.send(Message("Timed", b"past", deliver_at_ms=int(t0 * 1000) - 3_600_000))
        wait_for(lambda: len(arrivals.at) == len(due), timeout_s=90, what="every timer")
        time.sleep(0.5)
    finally:
        c.shutdown()
    late = lateness(arrivals, due)
    print(f"fire lag p50 {late[len(late) // 2] * 1000:.1f} ms, p99 "
          f"{late[int(len(late) * 0.99)] * 1000:.1f} ms")
    assert late[0] >= -0.002, f"a timer came {-late[0] * 1000:.0f} ms early"
    assert late[-1] < 2.0, f"p99 {late[int(len(late) * 0.99)] * 1000:.0f} ms, max {late[-1]:.2f} s"
    assert all(len(v) == 1 for v in arrivals.at.values()), "delivered twice"


def test_a_timer_too_far_ahead_or_not_a_time_is_refused_and_nothing_stored(local_cluster):
    local_cluster.add_broker("broker-a", timer_max_delay_ms=3_600_000)
    local_cluster.create_topic("Timed", queues=1)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    with Producer(zookeeper=zk, cluster=cl, retry_times_when_send_failed=0) as p:
        far = int(time.time() * 1000) + 2 * 3_600_000
        with pytest.raises(Exception, match="timer_max_delay_ms"):
            p.send(Message("Timed", b"far", deliver_at_ms=far))
        bad = Message("Timed", b"bad")
        bad.properties["DELIVER_AT"] = "tomorrow"
        with pytest.raises(Exception, match="epoch milliseconds"):
            p.send(bad)
        assert p.send(Message("Timed", b"ok", deliver_at_ms=far - 3_600_000)).status is \
            SendStatus.SEND_OK


def test_kill_9_resumes_the_wheel_from_its_checkpoint(local_cluster, small_store):
    broker = local_cluster.add_broker("broker-a", flush="SYNC_FLUSH",
                                      offset_persist_interval_ms=100, **small_store)
    local_cluster.create_topic("Timed", queues=1)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    t0 = time.time()
    due = {b"k%04d" % i: t0 + 4 + (i % 300) * 0.01 for i in range(3000)}
    items = list(due.items())
    with Producer(zookeeper=zk, cluster=cl) as p:
        for k in range(0, len(items), 100):
            p.send_batch([Message("Timed", b, deliver_at_ms=int(at * 1000))
                          for b, at in items[k:k + 100]])
    time.sleep(1.5)                            # indexed and checkpointed (every second)
    broker.kill()
    broker.start()
    arrivals = Arrivals()
    c = consume(zk, cl, "timed", "Timed", arrivals)
    try:
        wait_for(lambda: len(arrivals.at) == len(due), timeout_s=30, what="every timer")
    finally:
        c.shutdown()
    late = lateness(arrivals, due)
    assert late[0] >= -0.002 and late[-1] < 5.0
    with open(broker.log_path) as f:
        text = f.read()
    assert "built again" not in text
    opened = re.findall(r"timer index opened: (\d+) timer records indexed", text)
    assert opened[-1] == "3000", opened          # the restart indexed none of them again
    resumed = re.findall(r"timers resume at \d+ with the timer topic read again from "
                         r"(\d+) to (\d+)", text)
    assert resumed, text[-3000:]
    low, high = map(int, resumed[-1])
    assert high == 3000 and high - low < 3000, resumed   # not every pending timer read again


def test_recall_before_due_and_every_bad_recall(local_cluster, small_store):
    """A recalled timer is never delivered; a recall of one that came due,
    replayed, garbage, forged for another topic or for another message is a
    clear error and cancels nothing; the CLI recalls by the handle that
    `produce --json` printed."""
    from duomq.common import recall_handle
    from duomq.common.errors import BadRequestError
    from duomq.testing.harness import run_cli
    local_cluster.add_broker("broker-a", **small_store)
    local_cluster.create_topic("Timed", queues=1)
    local_cluster.create_topic("Other", queues=1)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    env = {"DUOMQ_ZOOKEEPER": zk, "DUOMQ_CLUSTER": cl}
    arrivals = Arrivals()
    c = consume(zk, cl, "timed", "Timed", arrivals)
    try:
        with Producer(zookeeper=zk, cluster=cl) as p:
            at = int(time.time() * 1000) + 2500
            keep = p.send(Message("Timed", b"keep", deliver_at_ms=at))
            gone = p.send(Message("Timed", b"gone", deliver_at_ms=at))
            soon = p.send(Message("Timed", b"soon", deliver_at_ms=at - 2000))
            assert p.send(Message("Timed", b"plain")).recall_handle == ""
            assert p.recall("Timed", gone.recall_handle) == gone.msg_id
            with pytest.raises(BadRequestError, match="recalled before"):
                p.recall("Timed", gone.recall_handle)                 # replayed
            with pytest.raises(BadRequestError, match="is not a recall handle"):
                p.recall("Timed", "garbage-handle")
            with pytest.raises(BadRequestError, match="of topic 'Timed', not 'Other'"):
                p.recall("Other", keep.recall_handle)
            forged = recall_handle.make("Other", keep.msg_id, at)   # the right id, another topic
            with pytest.raises(BadRequestError, match="no timer message of topic 'Other'"):
                p.recall("Other", forged)
            wrong_time = recall_handle.make("Timed", keep.msg_id, at + 1)
            with pytest.raises(BadRequestError, match="no timer message"):
                p.recall("Timed", wrong_time)
            wait_for(lambda: b"soon" in arrivals.at, timeout_s=10, what="the early timer")
            with pytest.raises(BadRequestError, match="too late to recall"):
                p.recall("Timed", soon.recall_handle)
        out = run_cli("produce", "Timed", "by-cli", "--delay", "30s", "--json", env=env).stdout
        line = next(json.loads(x) for x in out.splitlines() if "recall_handle" in x)
        done = run_cli("message", "recall", "Timed", line["recall_handle"], env=env).stdout
        assert f"recalled {line['msg_id']}" in done
        again = run_cli("message", "recall", "Timed", line["recall_handle"], env=env, check=False)
        assert again.returncode != 0 and "recalled before" in again.stderr + again.stdout
        assert "Traceback" not in again.stderr
        wait_for(lambda: b"keep" in arrivals.at, timeout_s=10, what="the timer kept")
        iso_at = int(time.time()) + 2                       # whole seconds: ISO has no ms here
        iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(iso_at))
        out = run_cli("produce", "Timed", "at-iso", "--deliver-at", iso, "-v", env=env).stdout
        assert f"due {iso}" in out, out
        run_cli("produce", "Timed", "at-epoch", "--deliver-at", str(iso_at * 1000), env=env)
        for bad in (["--deliver-at", "tomorrow"], ["--deliver-at", "30m"],
                    ["--delay", "3s", "--deliver-at", str(iso_at * 1000)]):
            r = run_cli("produce", "Timed", "bad", *bad, env=env, check=False)
            assert r.returncode == 2 and "Traceback" not in r.stderr, (bad, r.stderr)
        wait_for(lambda: b"at-iso" in arrivals.at and b"at-epoch" in arrivals.at,
                 timeout_s=10, what="the timers the CLI set at a time")
        time.sleep(0.5)
    finally:
        c.shutdown()
    assert b"gone" not in arrivals.at and b"by-cli" not in arrivals.at
    assert b"bad" not in arrivals.at
    assert min(arrivals.at[b"keep"]) >= at / 1000 - 0.002
    assert min(min(arrivals.at[b"at-iso"]), min(arrivals.at[b"at-epoch"])) >= iso_at - 0.002


def test_operators_see_pending_timers_their_lag_and_when_one_comes_due(local_cluster,
                                                                       small_store):
    """Metrics (pending by topic, fired, recalled, the fire lag histogram),
    `topic describe` and `message get` tell what timers wait; the pending
    count survives kill -9 (it is in the index's checkpoint)."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    from duomq.testing.harness import member_node, run_cli
    broker = local_cluster.add_broker("broker-a", offset_persist_interval_ms=100, **small_store)
    local_cluster.create_topic("Timed", queues=2)
    local_cluster.create_topic("Other", queues=1)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    env = {"DUOMQ_ZOOKEEPER": zk, "DUOMQ_CLUSTER": cl}

    def metrics():
        url = member_node(zk, cl, "broker-a", 0).metrics
        with urllib.request.urlopen(url, timeout=5) as r:
            text = r.read().decode()
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for f in text_string_to_metric_families(text) for s in f.samples}

    def pending(topic):
        return metrics().get(("duomq_timers_pending", (("topic", topic),)), 0)

    far = int(time.time() * 1000) + 600_000
    soon = int(time.time() * 1000) + 1500
    with Producer(zookeeper=zk, cluster=cl) as p:
        far_sent = [p.send(Message("Timed", b"far%d" % i, deliver_at_ms=far + i))
                    for i in range(50)]
        p.send_batch([Message("Timed", b"soon%d" % i, deliver_at_ms=soon) for i in range(20)])
        p.send_batch([Message("Other", b"o%d" % i, delay_ms=600_000) for i in range(5)])
        for r in far_sent[:3]:
            p.recall("Timed", r.recall_handle)
    wait_for(lambda: pending("Timed") == 47, timeout_s=10,
             what="the far timers pending, the recalled and the fired not")
    m = metrics()
    assert m[("duomq_timers_pending", (("topic", "Other"),))] == 5
    assert m[("duomq_timers_fired_total", ())] == 20
    assert m[("duomq_timers_recalled_total", ())] == 3
    assert m[("duomq_timer_fire_lag_seconds_count", ())] == 20
    assert m[("duomq_timer_fire_lag_seconds_bucket", (("le", "0.1"),))] >= 19   # (a loaded CI)
    out = run_cli("topic", "describe", "Timed", env=env).stdout
    assert "timer messages pending: broker-a 47" in out, out
    got = json.loads(run_cli("topic", "describe", "Other", "--json", env=env).stdout)
    assert got["timers_pending"] == {"broker-a": 5}
    shown = run_cli("message", "get", far_sent[10].msg_id, env=env).stdout
    assert "comes due" in shown and "on Timed" in shown, shown
    row = json.loads(run_cli("message", "get", far_sent[10].msg_id, "--json", env=env).stdout)
    assert row["deliver_at_ms"] == far + 10 and row["timer_topic"] == "Timed"
    time.sleep(1.5)                             # the index checkpointed (every second)
    broker.kill()
    broker.start()
    wait_for(lambda: pending("Timed") == 47 and pending("Other") == 5, timeout_s=15,
             what="the pending counts after kill -9")


def test_a_restart_with_a_million_timers_pending_reads_none_of_them_again(local_cluster):
    """1,000,000 timers pending (1 to 2 days ahead), kill -9: the restart
    opens the index at its checkpoint and reads again only the timer records
    past the last offsets committed (none, once they were persisted), fires
    a new timer at its time, and still counts a million pending."""
    from duomq.proto import pb
    from duomq.testing.harness import member_node
    broker = local_cluster.add_broker("broker-a", offset_persist_interval_ms=200)
    local_cluster.create_topic("Timed", queues=4)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    n, now, day = 1_000_000, int(time.time() * 1000), 86_400_000
    body = b"x" * 50
    with Producer(zookeeper=zk, cluster=cl) as p:
        for lo in range(0, n, 1024):
            p.send_batch([Message("Timed", body, deliver_at_ms=now + day + (i * 7919) % day)
                          for i in range(lo, lo + 1024)][:n - lo])

    def status():
        with Producer(zookeeper=zk, cluster=cl) as p:
            address = member_node(zk, cl, "broker-a", 0).address
            return p.remoting.call(address, pb.BROKER_STATUS, pb.BrokerStatusRequest(), 10)[2]
    wait_for(lambda: status().timers_pending.get("Timed") == n, timeout_s=120,
             what="a million timers indexed")
    time.sleep(1.5)                             # the index checkpointed, the offsets persisted
    mark = os.path.getsize(broker.log_path)
    broker.kill()
    t0 = time.monotonic()
    broker.start()
    serving = time.monotonic() - t0
    arrivals = Arrivals()
    c = consume(zk, cl, "timed", "Timed", arrivals)
    try:
        with Producer(zookeeper=zk, cluster=cl) as p:
            at = int(time.time() * 1000) + 500
            p.send(Message("Timed", b"after", deliver_at_ms=at))
        wait_for(lambda: b"after" in arrivals.at, timeout_s=20, what="a timer after the restart")
    finally:
        c.shutdown()
    assert arrivals.at[b"after"][0] >= at / 1000 - 0.002
    with open(broker.log_path) as f:
        f.seek(mark)
        text = f.read()
    print(f"a million pending: serving again {serving:.2f} s after kill -9")
    assert "built again" not in text
    assert re.findall(r"timer index opened: (\d+) timer records indexed", text) == [str(n)]
    low, high = map(int, re.findall(r"timers resume at \d+ with the timer topic read again "
                                    r"from (\d+) to (\d+)", text)[0])
    assert high == n and high - low <= 1024, (low, high)   # at most the last batch
    assert status().timers_pending.get("Timed") == n


def test_the_masters_index_made_at_the_send_is_the_slaves_made_from_the_log(local_cluster):
    """The master indexes a batch of timers as it stores it (nothing read
    back); its slave indexes the same records from the replicated log: the
    two indexes hold the same entries, slot by slot, and the same counts."""
    from duomq.testing.harness import wait_slaves_hold
    from duomq.timer.counts import TimerCounts
    from duomq.timer.index import TimerIndex
    from duomq.timer.indexer import TimerIndexer
    roll = dict(file_reserved_hours=0.01)       # timers over 18 s ahead: indexed for a roll
    master = local_cluster.add_broker("broker-a", 0, **roll)
    slave = local_cluster.add_broker("broker-a", 1, **roll)
    local_cluster.create_topic("Timed", queues=3)
    local_cluster.create_topic("Other", queues=1)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    start = int(time.time()) * 1000
    t0 = start + 10_000                           # due 10 to 40 s ahead: some rolled
    rng = random.Random(7)
    ats = {t0 + 5, t0 + 7}

    def at() -> int:
        ats.add(t := t0 + rng.randrange(30_000))
        return t
    with Producer(zookeeper=zk, cluster=cl) as p:
        for k in range(40):
            p.send_batch([Message("Timed", b"b%d-%d" % (k, i), deliver_at_ms=at())
                          for i in range(50)])
            p.send(Message("Other", b"one%d" % k, deliver_at_ms=at()))
        mixed = [Message("Timed", b"now"), Message("Timed", b"later", deliver_at_ms=t0 + 5)]
        p.send_batch(mixed)                           # not timers only: placed one by one
        p.recall("Timed", p.send(Message("Timed", b"gone", deliver_at_ms=t0 + 7)).recall_handle)
        p.send(Message("Timed", b"last"))             # after all of them in the log
    wait_slaves_hold(zk, cl, "Timed")
    time.sleep(1.5)                                   # both indexes checkpointed
    master.stop()
    slave.stop()
    indexer = TimerIndexer("", 1000, 7 * 86_400_000)   # (the slot count brokers use)
    got = []
    for b in (master, slave):
        idx = TimerIndex(os.path.join(b.data_dir, "store", "timer"), 1000, indexer.slots)
        got.append(([[(e.deliver_at, e.phys, e.size, e.kind, e.origin)
                      for e in idx.entries(start + s * 1000) + idx.recalls(start + s * 1000)]
                     for s in range(45)], idx.position,
                    TimerCounts.decode(idx.extra).pending(start)))
        idx.close()
    (m_slots, m_pos, m_counts), (s_slots, s_pos, s_counts) = got
    assert m_pos == s_pos == 40 * 51 + 3 and sum(map(len, m_slots)) == 40 * 51 + 3
    assert m_slots == s_slots
    assert any(e[0] not in ats for slot in m_slots for e in slot)   # some indexed for a roll
    assert m_counts == s_counts == {"Timed": 40 * 50 + 1, "Other": 40}


def test_a_producer_cannot_forge_a_recall_of_anothers_timer(local_cluster, small_store):
    """A message carrying RECALL_OF (what a recall record is indexed by) or
    TIMER_ORIGIN, sent as a timer, single or in a batch of timers: refused,
    nothing stored, and the timer it named is delivered at its time."""
    from duomq.common.errors import BadRequestError
    from duomq.format.record import parse_msg_id_epoch
    local_cluster.add_broker("broker-a", **small_store)
    local_cluster.create_topic("Timed", queues=1)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    arrivals = Arrivals()
    c = consume(zk, cl, "timed", "Timed", arrivals)
    try:
        with Producer(zookeeper=zk, cluster=cl, retry_times_when_send_failed=0) as p:
            at = int(time.time() * 1000) + 2000
            victim = p.send(Message("Timed", b"victim", deliver_at_ms=at))
            phys = str(parse_msg_id_epoch(victim.msg_id)[1])
            for name in ("RECALL_OF", "TIMER_ORIGIN"):
                evil = [Message("Timed", b"evil", deliver_at_ms=at, properties={name: phys})]
                with pytest.raises(BadRequestError, match="broker's own"):
                    p.send(evil[0])
                with pytest.raises(BadRequestError, match="broker's own"):
                    p.send_batch([Message("Timed", b"ok", deliver_at_ms=at)] * 3 + evil)
        wait_for(lambda: b"victim" in arrivals.at, timeout_s=10, what="the victim's timer")
        time.sleep(0.5)
    finally:
        c.shutdown()
    assert set(arrivals.at) == {b"victim"}           # nothing of the refused batches stored


def test_timers_due_past_the_logs_retention_are_rolled_forward_and_delivered(local_cluster,
                                                                           small_store):
    """Retention of 7.2 s (the roll: 3.6 s) and 1 MiB segments filled by
    other traffic: timers due 14 s ahead outlive their first copies' segments
    (deleted), each is copied forward before that, delivered once at its
    time with the id its producer was given; one recalled early stays
    recalled through its copies, and so does one recalled once its copy had
    been rolled forward."""
    from duomq.proto import pb
    from duomq.testing.harness import member_node
    broker = local_cluster.add_broker("broker-a", file_reserved_hours=0.002,
                                      retention_check_interval_ms=300,
                                      retention_wait_for_consumers=False, **small_store)
    local_cluster.create_topic("Timed", queues=2)
    local_cluster.create_topic("Filler", queues=1)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    ids: dict[bytes, str] = {}

    class Seen(Arrivals):
        def __call__(self, m):
            super().__call__(m)
            ids[m.body] = m.properties.get("ORIGIN_MESSAGE_ID", "")

    arrivals = Seen()
    c = consume(zk, cl, "timed", "Timed", arrivals)
    try:
        with Producer(zookeeper=zk, cluster=cl) as p:
            at = int(time.time() * 1000) + 14_000
            sent = {b"t%03d" % i: p.send(Message("Timed", b"t%03d" % i, deliver_at_ms=at + i * 5))
                    for i in range(100)}
            p.recall("Timed", sent.pop(b"t050").recall_handle)
            first = min(parse_phys(r.msg_id) for r in sent.values())
            filler = b"f" * 60_000
            late_recall = time.time() + 6                  # past the first roll (3.6 s)
            while time.time() * 1000 < at - 1000:          # segments fill, age and go
                p.send_batch([Message("Filler", filler)] * 8)
                if late_recall and time.time() > late_recall:
                    late_recall = 0                        # a copy rolled forward: recalled too
                    p.recall("Timed", sent.pop(b"t070").recall_handle)
                time.sleep(0.05)
            address = member_node(zk, cl, "broker-a", 0).address
            st = p.remoting.call(address, pb.BROKER_STATUS, pb.BrokerStatusRequest(), 5)[2]
        assert st.min_physical_offset > first + (1 << 20), "retention deleted no first copy"
        wait_for(lambda: len(arrivals.at) >= len(sent), timeout_s=15, what="every timer")
        time.sleep(1.0)
    finally:
        c.shutdown()
    assert set(arrivals.at) == set(sent)                       # the recalled one: never
    assert all(len(v) == 1 for v in arrivals.at.values()), "delivered twice"
    for body, r in sent.items():
        assert ids[body] == r.msg_id                            # the id it was sent with
        assert min(arrivals.at[body]) >= (at + int(body[1:]) * 5) / 1000 - 0.002
    with open(broker.log_path) as f:
        assert "gone from the log" not in f.read()


def parse_phys(msg_id: str) -> int:
    from duomq.format.record import parse_msg_id_epoch
    return parse_msg_id_epoch(msg_id)[1]
