"""The options Spark's Kafka source users reach for, on real data (local[2]):
subscribePattern, assign, per-queue timestamps and their strategy,
minOffsetsPerTrigger with maxTriggerDelay, the offsets-behind-latest
metrics, and maxReplicaLagMs."""

import time

import pytest

from duomq.client import Message, Producer
from duomq.client.spark import source_metrics
from duomq.common.message import MessageQueue
from duomq.testing.harness import wait_for

pytestmark = pytest.mark.integration


def send(cluster, topic, n, queue=None, tag=b"m", batch=100):
    with Producer(zookeeper=cluster.zookeeper, cluster=cluster.cluster) as p:
        mq = MessageQueue(topic, "broker-a", queue) if queue is not None else None
        for lo in range(0, n, batch):
            r = p.send_batch([Message(topic, tag + b"%06d" % i) for i in range(lo, min(n, lo + batch))],
                             queue=mq)
            assert r.status.value == "SEND_OK"


@pytest.fixture
def one(local_cluster):
    local_cluster.add_broker("broker-a", 0)
    return local_cluster


def read(spark, cluster, **options):
    r = spark.read.format("duomq").option("zookeeper", cluster.zookeeper) \
        .option("cluster", cluster.cluster)
    for k, v in options.items():
        r = r.option(k, str(v))
    return r.load()


def stream(spark, cluster, tmp_path, trigger="200 milliseconds", **options):
    r = spark.readStream.format("duomq").option("zookeeper", cluster.zookeeper) \
        .option("cluster", cluster.cluster)
    for k, v in options.items():
        r = r.option(k, str(v))
    return r.load().select("topic", "queue_id", "queue_offset", "body").writeStream \
        .format("memory").queryName(f"q{int(time.time() * 1000)}") \
        .option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime=trigger) \
        .start()


def rows_of(spark, q):
    return spark.sql(f"select * from {q.name}").collect()


def test_subscribe_pattern_reads_matching_topics_and_picks_up_new_ones(spark, one, tmp_path):
    for t in ("EvA", "EvB", "Other"):
        one.create_topic(t, 2)
        send(one, t, 50, tag=t.encode())
    df = read(spark, one, subscribePattern="Ev[A-Z]")
    assert sorted({r.topic for r in df.collect()}) == ["EvA", "EvB"] and df.count() == 100
    assert read(spark, one, subscribe="EvA,Other").count() == 100      # Kafka's name for topic
    q = stream(spark, one, tmp_path, subscribePattern="Ev.*", startingOffsets="earliest")
    try:
        wait_for(lambda: len(rows_of(spark, q)) == 100, 60, "the existing topics")
        one.create_topic("EvC", 1)                        # created after the query started
        send(one, "EvC", 30, tag=b"C")
        wait_for(lambda: len(rows_of(spark, q)) == 130, 60, "the new topic's rows")
        assert sum(r.topic == "EvC" for r in rows_of(spark, q)) == 30
    finally:
        q.stop()


def test_assign_reads_exactly_the_queues_named(spark, one):
    one.create_topic("Clicks", 3)
    for qid in range(3):
        send(one, "Clicks", 40 + qid, queue=qid)
    df = read(spark, one, assign='{"Clicks": {"broker-a": [0, 2]}}')
    assert sorted({r.queue_id for r in df.collect()}) == [0, 2] and df.count() == 40 + 42
    with pytest.raises(Exception, match=r"assign names queues the topics do not have"):
        read(spark, one, assign='{"Clicks": {"broker-a": [7]}}').count()
    with pytest.raises(Exception, match="exactly one of the options topic"):
        read(spark, one, topic="Clicks", assign='{"Clicks": {"broker-a": [0]}}').count()


def test_offsets_by_timestamp_per_queue_and_the_strategy(spark, one):
    one.create_topic("Clicks", 2)
    send(one, "Clicks", 100, queue=0, tag=b"early")
    send(one, "Clicks", 100, queue=1, tag=b"early")
    time.sleep(0.05)
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    send(one, "Clicks", 60, queue=0, tag=b"late")
    send(one, "Clicks", 60, queue=1, tag=b"late")
    # queue 0 from the cut; queue 1, not named, from startingOffsets (earliest)
    df = read(spark, one, topic="Clicks",
              startingOffsetsByTimestamp=f'{{"Clicks": {{"broker-a": {{"0": {cut}}}}}}}')
    rows = df.collect()
    assert sum(r.queue_id == 0 for r in rows) == 60 and sum(r.queue_id == 1 for r in rows) == 160
    assert all(bytes(r.body).startswith(b"late") for r in rows if r.queue_id == 0)
    # endingOffsetsByTimestamp: queue 1 up to the cut (exclusive), queue 0 to the end
    df = read(spark, one, topic="Clicks",
              endingOffsetsByTimestamp=f'{{"Clicks": {{"broker-a": {{"1": {cut}}}}}}}')
    rows = df.collect()
    assert sum(r.queue_id == 1 for r in rows) == 100 and sum(r.queue_id == 0 for r in rows) == 160
    future = cut + 3_600_000
    with pytest.raises(Exception, match=r"no message stored at or after the starting timestamp"):
        read(spark, one, topic="Clicks", startingTimestamp=future).count()
    assert read(spark, one, topic="Clicks", startingTimestamp=future,
                startingOffsetsByTimestampStrategy="latest").count() == 0


def test_min_offsets_per_trigger_waits_for_enough_or_the_delay(spark, one, tmp_path):
    one.create_topic("Clicks", 2)
    q = stream(spark, one, tmp_path, topic="Clicks", startingOffsets="latest",
               minOffsetsPerTrigger=100, maxTriggerDelay="6s")
    try:
        wait_for(lambda: q.recentProgress, 60, "the query running")
        time.sleep(1.0)
        t0 = time.monotonic()
        send(one, "Clicks", 30)
        time.sleep(2.0)
        assert rows_of(spark, q) == []                    # 30 < 100: no batch yet
        wait_for(lambda: len(rows_of(spark, q)) == 30, 30, "the delayed batch")
        assert time.monotonic() - t0 >= 4.0               # ... once maxTriggerDelay passed
        t1 = time.monotonic()
        # one batch: sent as two, a trigger between them would take the first
        # 100 (enough) and leave 50 to wait for the delay
        send(one, "Clicks", 150, batch=150)
        wait_for(lambda: len(rows_of(spark, q)) == 180, 30, "a full batch")
        assert time.monotonic() - t1 < 5.0                # enough waiting: well within the
                                                          # delay (6 s), on a busy machine too
    finally:
        q.stop()


def test_offsets_behind_latest_from_the_progress(spark, one, tmp_path):
    one.create_topic("Clicks", 2)
    send(one, "Clicks", 600)
    q = stream(spark, one, tmp_path, trigger="1 second", topic="Clicks",
               startingOffsets="earliest", maxOffsetsPerTrigger=200)
    try:
        wait_for(lambda: any(p["numInputRows"] for p in q.recentProgress), 60, "a first batch")
        first = next(p for p in q.recentProgress if p["numInputRows"])
        (m,) = source_metrics(first, one.zookeeper, one.cluster)
        assert m["maxOffsetsBehindLatest"] + m["minOffsetsBehindLatest"] == 400
        assert m["avgOffsetsBehindLatest"] == 200.0
        assert m["replicaLagMs"] == {}                    # no slave here
        wait_for(lambda: len(rows_of(spark, q)) == 600, 60, "the rest")
        wait_for(lambda: source_metrics(q.lastProgress)[0]["maxOffsetsBehindLatest"] == 0, 30,
                 "a progress caught up")
    finally:
        q.stop()


def test_bad_kafka_options_are_refused_by_name(spark, one):
    one.create_topic("Clicks", 1)
    for options, error in [
            ({"subscribePattern": "(("}, "subscribePattern"),
            ({"topic": "Clicks", "startingOffsetsByTimestampStrategy": "earliest"},
             "startingOffsetsByTimestampStrategy"),
            ({"topic": "Clicks", "maxTriggerDelay": "5s"}, "needs minOffsetsPerTrigger"),
            ({"topic": "Clicks", "minOffsetsPerTrigger": "10"}, "streaming queries only"),
            ({"topic": "Clicks", "maxReplicaLagMs": "-1"}, "maxReplicaLagMs")]:
        with pytest.raises(Exception, match=error):
            read(spark, one, **options).count()
