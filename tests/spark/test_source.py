"""The Spark source and sink against a real master and slave (local[2])."""

import time

import pytest

from duomq.client import Message, Producer, PullConsumer
from duomq.common.message import MessageQueue
from duomq.testing.harness import wait_for, wait_slaves_hold

pytestmark = pytest.mark.integration


def produce(zk, cluster, topic, n, tag_every=0, start=0):
    sent = []
    with Producer(zookeeper=zk, cluster=cluster) as p:
        for i in range(start, start + n, 100):
            msgs = [Message(topic, b"m%06d" % j, tags="even" if tag_every and j % 2 == 0 else "",
                            keys=f"k{j}") for j in range(i, min(i + 100, start + n))]
            r = p.send_batch(msgs, queue=MessageQueue(topic, "broker-a", (i // 100) % 2))
            assert r.status.value == "SEND_OK"
            sent.extend(msgs)
    return sent


@pytest.fixture
def pair(local_cluster):
    local_cluster.add_broker("broker-a", 0, replication="SYNC")
    local_cluster.add_broker("broker-a", 1, replication="SYNC")
    local_cluster.create_topic("Clicks", 2)
    return local_cluster


def reader(spark, cluster, **options):
    r = spark.read.format("duomq").option("zookeeper", cluster.zookeeper) \
        .option("cluster", cluster.cluster).option("topic", "Clicks")
    for k, v in options.items():
        r = r.option(k, str(v))
    return r.load()


def test_batch_read_of_an_offset_range_equals_what_was_produced(spark, pair):
    produce(pair.zookeeper, pair.cluster, "Clicks", 1000, tag_every=2)
    wait_slaves_hold(pair.zookeeper, pair.cluster, "Clicks")
    df = reader(spark, pair, startingOffsets='{"Clicks": {"broker-a": {"0": 100, "1": -2}}}',
                endingOffsets='{"Clicks": {"broker-a": {"0": 300, "1": -1}}}',
                maxRecordsPerPartition=64)
    rows = df.orderBy("queue_id", "queue_offset").collect()
    q0 = [r for r in rows if r.queue_id == 0]
    q1 = [r for r in rows if r.queue_id == 1]
    assert [r.queue_offset for r in q0] == list(range(100, 300))
    assert [r.queue_offset for r in q1] == list(range(500))
    # queue 0 holds batches 0, 2, 4, ... of 100 messages
    expect_q0 = [j for i in range(0, 1000, 200) for j in range(i, i + 100)][100:300]
    assert [bytes(r.body) for r in q0] == [b"m%06d" % j for j in expect_q0]
    r0 = q0[0]
    assert (r0.topic, r0.group, r0.keys) == ("Clicks", "broker-a", f"k{expect_q0[0]}")
    assert r0.tags == ("even" if expect_q0[0] % 2 == 0 else "")
    assert r0.msg_id.startswith("broker-a:") and r0.properties == {}
    assert r0.store_timestamp >= r0.born_timestamp.replace(microsecond=0)
    assert df.rdd.getNumPartitions() == 4 + 8       # 200 and 500 split by 64


def test_batch_read_with_a_subscription_keeps_only_those_tags(spark, pair):
    sent = produce(pair.zookeeper, pair.cluster, "Clicks", 1000, tag_every=2)
    wait_slaves_hold(pair.zookeeper, pair.cluster, "Clicks")
    df = reader(spark, pair, subscription="even", maxRecordsPerPartition=64)
    rows = df.orderBy("queue_id", "queue_offset").collect()
    assert sorted(bytes(r.body) for r in rows) == sorted(m.body for m in sent if m.tags == "even")
    assert {r.tags for r in rows} == {"even"}
    # every row once, at its own offset, though the broker's filtered scans
    # run past each 64-offset partition
    assert len({(r.queue_id, r.queue_offset) for r in rows}) == len(rows) == 500
    assert reader(spark, pair, subscription="odd || none").count() == 0


def test_batch_read_by_timestamp(spark, pair):
    produce(pair.zookeeper, pair.cluster, "Clicks", 400)
    time.sleep(0.05)
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    produce(pair.zookeeper, pair.cluster, "Clicks", 200, start=400)
    wait_slaves_hold(pair.zookeeper, pair.cluster, "Clicks")
    bodies = sorted(bytes(r.body) for r in reader(spark, pair, startingTimestamp=cut).collect())
    assert bodies == [b"m%06d" % j for j in range(400, 600)]
    before = reader(spark, pair, endingTimestamp=cut).count()
    assert before == 400


def bodies_of(df):
    return [bytes(r.body) for r in df.select("body").collect()]


def stream(spark, cluster, checkpoint, out, trigger, **options):
    r = spark.readStream.format("duomq").option("zookeeper", cluster.zookeeper) \
        .option("cluster", cluster.cluster).option("topic", "Clicks")
    for k, v in options.items():
        r = r.option(k, str(v))
    w = r.load().select("queue_id", "queue_offset", "body").writeStream.format("parquet") \
        .option("path", out).option("checkpointLocation", checkpoint)
    return w.trigger(**trigger).start()


def test_streaming_available_now_restarted_midway_writes_every_message_once(spark, pair,
                                                                           tmp_path):
    sent = produce(pair.zookeeper, pair.cluster, "Clicks", 1200)
    wait_slaves_hold(pair.zookeeper, pair.cluster, "Clicks")
    ck, out = str(tmp_path / "ck"), str(tmp_path / "out")
    q = stream(spark, pair, ck, out, {"processingTime": "1 second"},
               startingOffsets="earliest", maxOffsetsPerTrigger=300, consumerGroup="spark-clicks")
    wait_for(lambda: any(p["numInputRows"] for p in q.recentProgress), 60, "a first batch")
    q.stop()
    first = spark.read.parquet(out).count()
    assert 0 < first < 1200
    sent += produce(pair.zookeeper, pair.cluster, "Clicks", 400, start=1200)
    wait_slaves_hold(pair.zookeeper, pair.cluster, "Clicks")
    q = stream(spark, pair, ck, out, {"availableNow": True}, startingOffsets="earliest",
               maxOffsetsPerTrigger=300, consumerGroup="spark-clicks")
    q.awaitTermination(120)
    got = bodies_of(spark.read.parquet(out))
    assert len(got) == len(sent) == 1600
    assert sorted(got) == sorted(m.body for m in sent)
    # consumerGroup: the query's progress is committed for lag reporting
    c = PullConsumer("spark-clicks", zookeeper=pair.zookeeper, cluster=pair.cluster)
    try:
        committed = [c.committed(MessageQueue("Clicks", "broker-a", q)) for q in (0, 1)]
    finally:
        c.close()
    assert max(committed) > 0      # Spark commits a batch's end when the next one starts


def test_sink_writes_rows_a_consumer_reads(spark, pair):
    rows = [(b"row-%05d" % i, f"k{i}", "even" if i % 2 == 0 else "odd", {"n": str(i)})
            for i in range(2500)]
    df = spark.createDataFrame(rows, "body binary, keys string, tags string, "
                                     "properties map<string,string>").repartition(3)
    df.write.format("duomq").option("zookeeper", pair.zookeeper) \
        .option("cluster", pair.cluster).option("topic", "Clicks").mode("append").save()
    c = PullConsumer("sink-check", zookeeper=pair.zookeeper, cluster=pair.cluster)
    try:
        got = []
        for q in (0, 1):
            mq = MessageQueue("Clicks", "broker-a", q)
            off = 0
            while True:
                r = c.pull(mq, off, 1000)
                if not r.messages:
                    break
                got += r.messages
                off = r.next_offset
    finally:
        c.close()
    assert sorted(m.body for m in got) == sorted(r[0] for r in rows)
    one = next(m for m in got if m.body == b"row-00007")
    assert (one.keys, one.tags, one.properties) == ("k7", "odd", {"n": "7"})


def test_sink_rows_name_their_topic_and_queue(spark, pair):
    pair.create_topic("Orders", 3)
    rows = [("Clicks", 1, None, b"c1"), ("Orders", 2, None, b"o2"), ("Orders", 0, "broker-a", b"o0"),
            ("Clicks", None, None, b"any")]
    df = spark.createDataFrame(rows, "topic string, queue int, `group` string, body binary")
    df.write.format("duomq").option("zookeeper", pair.zookeeper) \
        .option("cluster", pair.cluster).mode("append").save()
    with PullConsumer("sink-queues", zookeeper=pair.zookeeper, cluster=pair.cluster) as c:
        def bodies(topic, q):
            return [m.body for m in c.pull(MessageQueue(topic, "broker-a", q), 0, 100).messages]
        assert b"c1" in bodies("Clicks", 1) and b"c1" not in bodies("Clicks", 0)
        assert bodies("Orders", 2) == [b"o2"] and bodies("Orders", 0) == [b"o0"]
        assert bodies("Orders", 1) == []
        assert b"any" in bodies("Clicks", 0) + bodies("Clicks", 1)
    bad = spark.createDataFrame([("Orders", 7, b"x")], "topic string, queue int, body binary")
    with pytest.raises(Exception, match=r"row queue 7: topic 'Orders' has 3 queues \(0..2\)"):
        bad.write.format("duomq").option("zookeeper", pair.zookeeper) \
            .option("cluster", pair.cluster).mode("append").save()


def test_sink_refuses_rows_without_a_body_column(spark, pair):
    df = spark.createDataFrame([("x",)], "payload string")
    with pytest.raises(Exception, match="needs a body column"):
        df.write.format("duomq").option("zookeeper", pair.zookeeper) \
            .option("cluster", pair.cluster).option("topic", "Clicks").mode("append").save()


def test_fail_on_data_loss(spark, local_cluster):
    settings = {"segment_size_bytes": 64 << 10, "max_message_bytes": 8 << 10,
                "cq_entries_per_segment": 1000, "max_pull_bytes": 64 << 10,
                "file_reserved_hours": 0.0001, "retention_check_interval_ms": 100,
                "retention_wait_for_consumers": "false"}
    local_cluster.add_broker("broker-a", 0, **settings)
    local_cluster.create_topic("Clicks", 1)
    with Producer(zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster) as p:
        for _i in range(0, 3000, 100):
            p.send_batch([Message("Clicks", b"x" * 200) for _ in range(100)])
    c = PullConsumer("probe", zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster)
    mq = MessageQueue("Clicks", "broker-a", 0)
    try:
        wait_for(lambda: c.min_offset(mq) > 0, 20, "retention to delete the first segments")
        first_kept = c.min_offset(mq)
    finally:
        c.close()
    start = '{"Clicks": {"broker-a": {"0": 0}}}'
    with pytest.raises(Exception, match="deleted by retention"):
        reader(spark, local_cluster, startingOffsets=start, readFrom="master").count()
    df = reader(spark, local_cluster, startingOffsets=start, readFrom="master",
                failOnDataLoss="false")
    offsets = [r.queue_offset for r in df.select("queue_offset").collect()]
    assert min(offsets) >= first_kept and len(offsets) == 3000 - min(offsets)
