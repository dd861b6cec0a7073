"""Producers and consumers given a ``metrics_port`` serve Prometheus
metrics too: sends by outcome and their time, pulls, how late messages
arrive, how long they wait for a thread and how long the listener takes,
by outcome, and a consumer's lag as it sees it; a real Prometheus scrapes
them."""

import subprocess
import sys
import threading
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from duomq.client import Message, Producer, PushConsumer
from duomq.common.errors import ConfigError, InvalidNameError, TopicNotExistError
from duomq.testing.harness import SHORT_DELAYS, wait_for

pytestmark = pytest.mark.integration


def scrape(url: str) -> dict:
    """(name, sorted labels) -> value."""
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                          text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def value(got: dict, name: str, **labels):
    return got.get((name, tuple(sorted(labels.items()))))


def test_a_producers_metrics(local_cluster):
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    local_cluster.add_broker("broker-a", 0)
    local_cluster.create_topic("Metered", queues=2)
    with Producer(zookeeper=zk, cluster=cl, metrics_port=0, metrics_host="127.0.0.1") as p:
        assert p.metrics_url.startswith("http://127.0.0.1:")
        for _ in range(20):
            assert p.send(Message("Metered", b"x" * 100)).ok
        assert p.send_batch([Message("Metered", b"y")] * 30).ok
        assert p.send_async([Message("Metered", b"z")] * 5).result(10).ok
        with pytest.raises(TopicNotExistError):
            p.send(Message("NoSuchTopic", b"x"), timeout_ms=2000)
        with pytest.raises(InvalidNameError):
            p.send(Message("../" + "x" * 5000, b"x"))
        got = scrape(p.metrics_url)
        url = p.metrics_url
    assert value(got, "duomq_send_results_total", topic="(invalid)",
                 status="InvalidNameError") == 1
    assert value(got, "duomq_send_results_total", topic="Metered", status="SEND_OK") == 22
    assert value(got, "duomq_messages_sent_total", topic="Metered") == 55
    assert value(got, "duomq_send_cost_time_seconds_count", topic="Metered",
                 invocation_status="success") == 22
    assert value(got, "duomq_send_cost_time_seconds_sum", topic="Metered",
                 invocation_status="success") > 0
    assert value(got, "duomq_send_results_total", topic="NoSuchTopic",
                 status="TopicNotExistError") == 1
    assert value(got, "duomq_send_cost_time_seconds_count", topic="NoSuchTopic",
                 invocation_status="failure") == 1
    info = [k for k in got if k[0] == "duomq_client_info"]
    assert len(info) == 1 and ("kind", "Producer") in info[0][1]
    # the sends' spins on their answers (busy_poll_us, 250 by default): the first sends
    # spin (no wait was long yet); what they caught is part of that
    spins = value(got, "duomq_client_busy_poll_spins_total")
    assert spins >= 1 and 0 <= value(got, "duomq_client_busy_poll_caught_total") <= spins
    assert value(got, "duomq_client_busy_poll_seconds_total") > 0
    with pytest.raises(OSError):               # closed with the producer
        urllib.request.urlopen(url, timeout=2)


def test_a_port_in_use_is_refused_clearly(local_cluster):
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    local_cluster.add_broker("broker-a", 0)
    with Producer(zookeeper=zk, cluster=cl, metrics_port=0, metrics_host="127.0.0.1") as p:
        port = int(p.metrics_url.rsplit(":", 1)[1].split("/")[0])
        with pytest.raises(ConfigError, match=f"metrics_port {port}: cannot listen"):
            Producer(zookeeper=zk, cluster=cl, metrics_port=port, metrics_host="127.0.0.1")
    with pytest.raises(ConfigError, match="metrics_port: 70000"):
        Producer(zookeeper=zk, cluster=cl, metrics_port=70000)


def test_a_push_consumers_metrics_and_a_real_prometheus(local_cluster, prometheus):
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    local_cluster.add_broker("broker-a", 0, **SHORT_DELAYS)
    local_cluster.create_topic("Metered", queues=2)
    with Producer(zookeeper=zk, cluster=cl) as p:
        for i in range(10):
            assert p.send_batch([Message("Metered", b"m%d" % (i * 20 + j), tags="bad" if j == 0
                                         else "") for j in range(20)]).ok
    gate = threading.Event()
    done = []

    def handle(msg):
        if msg.tags == "bad" and msg.reconsume_times == 0:
            raise RuntimeError("refused once")          # sent back, seen again later
        gate.wait(10)
        done.append(msg)

    c = PushConsumer("meter-group", topic="Metered", on_message=handle, zookeeper=zk, cluster=cl,
                     consume_from="first", consume_threads=2, metrics_port=0,
                     metrics_host="127.0.0.1")
    c.start()
    try:
        # the listener is held: what was pulled waits, and the lag shows it
        wait_for(lambda: (value(scrape(c.metrics_url), "duomq_consumer_cached_messages",
                                topic="Metered", consumer_group="meter-group") or 0) > 0, 20,
                 "messages pulled and held")
        got = scrape(c.metrics_url)
        assert value(got, "duomq_consumer_queues_held", topic="Metered",
                     consumer_group="meter-group") == 2
        assert value(got, "duomq_consumer_client_lag_messages", topic="Metered",
                     consumer_group="meter-group") > 0
        gate.set()
        wait_for(lambda: len(done) >= 200, 60, "every message consumed")
        got = scrape(c.metrics_url)
        labels = {"topic": "Metered", "consumer_group": "meter-group"}
        assert value(got, "duomq_process_time_seconds_count", **labels,
                     invocation_status="failure") == 10
        assert value(got, "duomq_process_time_seconds_count", **labels,
                     invocation_status="success") >= 190
        assert value(got, "duomq_consumer_sent_back_total", consumer_group="meter-group",
                     to="retry") == 10
        assert value(got, "duomq_pull_results_total", **labels, status="FOUND") >= 1
        assert value(got, "duomq_pull_cost_time_seconds_count", **labels) >= 1
        assert value(got, "duomq_delivery_latency_seconds_count", **labels) >= 1
        assert value(got, "duomq_await_time_seconds_count", **labels) >= 1
        assert value(got, "duomq_consumer_rebalances_total", consumer_group="meter-group") >= 1
        # a real Prometheus scrapes the consumer like any target
        target = c.metrics_url.split("//")[1].split("/")[0]
        prom = prometheus([target])
        wait_for(lambda: prom.value('sum(duomq_process_time_seconds_count{'
                                    'consumer_group="meter-group"})') is not None, 30,
                 "Prometheus scraped the consumer")
        wait_for(lambda: prom.value('duomq_consumer_client_lag_messages{topic="Metered"}') == 0,
                 30, "the lag back to 0 in Prometheus")
    finally:
        gate.set()
        c.shutdown()


def test_duomq_consume_serves_metrics_while_it_runs(local_cluster):
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    local_cluster.add_broker("broker-a", 0)
    local_cluster.create_topic("Metered", queues=2)
    with Producer(zookeeper=zk, cluster=cl) as p:
        assert p.send_batch([Message("Metered", b"x")] * 50).ok
    proc = subprocess.Popen(
        [sys.executable, "-m", "duomq", "consume", "Metered", "--group", "cli-group",
         "--from", "first", "--until-idle", "30", "--quiet", "--metrics-port", "0",
         "--zookeeper", zk, "--cluster", cl],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        assert line.startswith("metrics on http://127.0.0.1:"), line
        url = line.split()[-1]
        wait_for(lambda: value(scrape(url), "duomq_process_time_seconds_count", topic="Metered",
                               consumer_group="cli-group", invocation_status="success") == 50,
                 30, "the CLI consumer's 50 messages in its metrics")
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
