"""Every broker serves Prometheus metrics on /metrics (prometheus_client):
what a user did shows in them, promtool finds the exposition well formed,
and a slave reports its replication lag."""

import json
import pathlib
import socket
import subprocess
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from duomq import __version__
from duomq.client import Message, Producer, PullConsumer
from duomq.common.message import MessageQueue
from duomq.format import native
from duomq.testing.harness import member_node, wait_for, wait_slaves_hold

pytestmark = pytest.mark.integration
DASHBOARD = pathlib.Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "duomq.json"


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


def samples(text: str) -> dict:
    """(name, sorted labels) -> value."""
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(text, name, **labels):
    return samples(text).get((name, tuple(sorted(labels.items()))))


def test_a_masters_metrics_count_what_was_done(local_cluster):
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    local_cluster.add_broker("broker-a", 0, flush="SYNC_FLUSH", replication="ASYNC")
    slave = local_cluster.add_broker("broker-a", 1, flush="SYNC_FLUSH", replication="ASYNC")
    local_cluster.create_topic("Metered", queues=2)
    url = member_node(zk, cl, "broker-a", 0).metrics
    assert url.startswith("http://127.0.0.1:") and url.endswith("/metrics")
    with Producer(zookeeper=zk, cluster=cl) as p:
        for _ in range(30):
            assert p.send_batch([Message("Metered", b"x" * 100)] * 10).status.value == "SEND_OK"
    q0, q1 = (MessageQueue("Metered", "broker-a", q) for q in (0, 1))
    with PullConsumer("meter-reader", zookeeper=zk, cluster=cl, read_from="master") as c:
        got = sum(len(c.pull(mq, 0, 1000).messages) for mq in (q0, q1))
        ends = {mq: c.max_offset(mq) for mq in (q0, q1)}
        c.commit({q0: ends[q0] - 40, q1: ends[q1]})      # 40 messages not yet consumed
        c.pull(q0, ends[q0], max_wait_ms=300)             # a long poll that waits it out
    assert got == 300
    text = scrape(url)
    assert value(text, "duomq_consumer_lag_messages", topic="Metered",
                 consumer_group="meter-reader") == 40
    assert 0 < value(text, "duomq_consumer_lag_latency_seconds", topic="Metered",
                     consumer_group="meter-reader") < 60
    assert value(text, "duomq_degraded") == 0
    assert 0 < value(text, "duomq_disk_free_bytes") <= value(text, "duomq_disk_total_bytes")
    assert value(text, "duomq_messages_in_total", topic="Metered") == 300
    assert value(text, "duomq_send_results_total", status="SEND_OK") == 30
    assert value(text, "duomq_messages_out_total", topic="Metered",
                 consumer_group="meter-reader") == 300
    assert value(text, "duomq_throughput_in_bytes_total") >= 300 * 100
    assert value(text, "duomq_throughput_out_bytes_total") >= 300 * 100
    assert value(text, "duomq_broker_info", cluster=cl, group="broker-a", broker_id="0",
                 role="MASTER") == 1
    assert value(text, "duomq_epoch") >= 1
    # the broker runs this interpreter's build: C loops, or numpy without a compiler
    assert value(text, "duomq_build_info", version=__version__, record_loops=native.kind()) == 1
    assert value(text, "duomq_fsync_seconds_count") >= 1            # group commit under SYNC_FLUSH
    assert value(text, "duomq_ack_wait_seconds_count") == 30        # each send awaited its fsync
    assert value(text, "duomq_pull_hold_seconds_count") == 1
    assert value(text, "duomq_pull_hold_seconds_sum") >= 0.25
    assert value(text, "duomq_promotions_total") == 1
    assert value(text, "duomq_truncations_total") == 0
    assert value(text, "duomq_recovery_seconds") >= 0
    assert value(text, "duomq_request_seconds_count", request_type="SEND") == 30
    assert value(text, "duomq_request_seconds_count", request_type="PULL") >= 2
    assert value(text, "duomq_commitlog_max_offset") > 0
    assert value(text, "duomq_commitlog_bytes") == value(text, "duomq_commitlog_max_offset")
    # just written: the tail is in the page cache
    assert value(text, "duomq_commitlog_tail_resident_ratio") == 1.0
    assert not any(n == "duomq_queue_max_offset" for n, _ in samples(text))   # not asked for
    assert value(text, "duomq_disk_free_bytes") > 0
    # the serving loop spun after its turns (busy_poll_us, 100 us each, longer only
    # when the OS or another thread took the CPU mid-spin), some spins caught a request
    spins, caught = value(text, "duomq_busy_poll_spins_total"), \
        value(text, "duomq_busy_poll_caught_total")
    assert spins >= 1 and 0 <= caught <= spins
    assert 0 < value(text, "duomq_busy_poll_seconds_total") <= spins * 0.05
    # the start-up heap out of the garbage collector's walks (a full collection of it
    # paused the loop ~30 ms in steady traffic); the collection before the freeze timed
    assert value(text, "duomq_gc_frozen_objects") > 10_000
    assert value(text, "duomq_gc_pause_seconds_count", generation="2") >= 1
    assert value(text, "duomq_gc_pause_seconds_sum", generation="2") > 0
    # promtool lints the exposition as Prometheus reads it
    lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                          text=True, timeout=30)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    # the client port is the broker's own here (no auth): its connections are
    # counted, and one that breaks ZMTP is closed and counted apart
    opened = value(text, "duomq_client_connections_opened_total")
    assert opened >= 2 and value(text, "duomq_client_connections_refused_total") == 0
    assert 0 <= value(text, "duomq_client_connections") <= opened
    host, port = member_node(zk, cl, "broker-a", 0).address.removeprefix("tcp://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as raw:
        raw.sendall(b"GET /metrics HTTP/1.1\r\n\r\n" + bytes(64))
        try:
            while raw.recv(4096):             # the broker hangs up
                pass
        except ConnectionResetError:
            pass
    wait_for(lambda: value(scrape(url), "duomq_client_connections_refused_total") == 1,
             what="the garbage connection counted")
    assert value(scrape(url), "duomq_client_connections_opened_total") >= opened + 1
    # the replication port's own: the slave's one link, counted apart from clients
    text = scrape(url)
    assert value(text, "duomq_replication_connections") == 1
    assert value(text, "duomq_replication_connections_opened_total") >= 1
    assert value(text, "duomq_replication_connections_refused_total") == 0

    wait_slaves_hold(zk, cl, "Metered")
    slave_url = member_node(zk, cl, "broker-a", 1).metrics
    wait_for(lambda: value(scrape(slave_url), "duomq_replication_lag_bytes", slave_id="1",
                           seen_by="slave") == 0, what="the slave's lag at 0")
    wait_for(lambda: value(scrape(url), "duomq_replication_lag_bytes", slave_id="1",
                           seen_by="master") == 0, what="the master's view of the slave at 0")
    text = scrape(slave_url)
    assert value(text, "duomq_broker_info", cluster=cl, group="broker-a", broker_id="1",
                 role="SLAVE") == 1
    assert value(text, "duomq_replication_lag_seconds") == 0
    assert value(text, "duomq_replication_links_lost_total") == 0      # a calm link
    assert slave.metrics_port == int(slave_url.rsplit(":", 1)[1].split("/")[0])


def test_a_real_prometheus_sees_traffic_lag_and_a_lost_slave(local_cluster, prometheus):
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    master = local_cluster.add_broker("broker-a", 0, ha_heartbeat_ms=500)
    slave = local_cluster.add_broker("broker-a", 1, ha_heartbeat_ms=500)
    local_cluster.create_topic("Scraped", queues=2)
    prom = prometheus([f"127.0.0.1:{b.metrics_port}" for b in (master, slave)])
    wait_for(lambda: prom.targets_up() == 2, what="both brokers scraped")
    with Producer(zookeeper=zk, cluster=cl) as p:
        for _ in range(25):
            p.send_batch([Message("Scraped", b"y" * 64)] * 20)       # 500 messages
    q0, q1 = (MessageQueue("Scraped", "broker-a", q) for q in (0, 1))
    with PullConsumer("scraper", zookeeper=zk, cluster=cl, read_from="master") as c:
        ends = {mq: c.max_offset(mq) for mq in (q0, q1)}
        assert len(c.pull(q0, 0, 100).messages) == 100
        c.commit({q0: ends[q0], q1: ends[q1] - 70})                  # 70 left to consume
    wait_slaves_hold(zk, cl, "Scraped")
    produced = 'sum(duomq_messages_in_total{topic="Scraped"})'
    lag = 'sum(duomq_consumer_lag_messages{topic="Scraped", consumer_group="scraper"})'
    wait_for(lambda: prom.value(produced) == 500, what="Prometheus to count 500 produced")
    wait_for(lambda: prom.value(lag) == 70, what="Prometheus to see a lag of 70")
    wait_for(lambda: prom.value("max(duomq_replication_lag_bytes)") == 0,
             what="the slave caught up, as Prometheus sees it")
    assert prom.value('count(duomq_broker_info{role="MASTER"})') == 1
    assert not [a for a in prom.alerts() if a["labels"]["alertname"] == "DuomqNoInSyncSlave"]

    # every expression of the Grafana dashboard answers, without error, with data
    board = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 15
    wait_for(lambda: all(prom.query(e) for e in exprs), 30,
             "every dashboard query to return data")

    slave.stop()                          # the master is left with no slave in sync
    wait_for(lambda: any(a["labels"]["alertname"] == "DuomqNoInSyncSlave"
                         and a["state"] in ("pending", "firing") for a in prom.alerts()),
             30, "DuomqNoInSyncSlave pending in Prometheus")
    alert = next(a for a in prom.alerts() if a["labels"]["alertname"] == "DuomqNoInSyncSlave")
    assert alert["labels"]["group"] == "broker-a" and alert["labels"]["broker_id"] == "0"
    wait_for(lambda: prom.value('up{job="duomq"} == 0') == 0, 30,
             what="Prometheus to see the stopped slave down")


def test_per_queue_series_only_when_asked(local_cluster):
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    local_cluster.add_broker("broker-a", 0, metrics_per_queue=True)
    local_cluster.create_topic("Metered", queues=3)
    with Producer(zookeeper=zk, cluster=cl) as p:
        for qid, n in ((0, 5), (1, 7), (2, 11)):
            assert p.send_batch([Message("Metered", b"x")] * n,
                                queue=MessageQueue("Metered", "broker-a", qid)).ok
    q1 = MessageQueue("Metered", "broker-a", 1)
    with PullConsumer("per-queue", zookeeper=zk, cluster=cl) as c:
        c.commit({q1: 3})
    url = member_node(zk, cl, "broker-a", 0).metrics
    text = scrape(url)
    assert [value(text, "duomq_queue_max_offset", topic="Metered", queue_id=str(q))
            for q in range(3)] == [5, 7, 11]
    assert value(text, "duomq_consumer_queue_lag_messages", topic="Metered",
                 consumer_group="per-queue", queue_id="1") == 4
    assert value(text, "duomq_consumer_lag_messages", topic="Metered",
                 consumer_group="per-queue") == 4
