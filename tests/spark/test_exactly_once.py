"""The Spark sink writes each row once (local[2], a real broker pair): a
batch write killed midway (a task fails, so does the job) and run again
with the same ``writeId`` stores every row exactly once; the same rows
written under another writeId are a new write."""

import pytest

from duomq.client import Message, Producer
from duomq.drill.load import read_back

pytestmark = pytest.mark.integration


@pytest.fixture
def pair(local_cluster):
    local_cluster.add_broker("broker-a", 0, replication="SYNC")
    local_cluster.add_broker("broker-a", 1, replication="SYNC")
    local_cluster.create_topic("Rows", 4)
    return local_cluster


def stored(cluster) -> list[bytes]:
    """Every body in topic Rows, read back from the masters (the drills' audit)."""
    return [body for _queue, body in read_back(cluster.zookeeper, cluster.cluster, "Rows")]


def test_a_write_killed_midway_and_run_again_stores_every_row_once(spark, pair):
    def rows(dies: bool):
        """3,000 rows in 3 partitions, the same each time; the first run's
        dies at row 2,500 (its task fails, and so does the job)."""
        return spark.range(3000, numPartitions=3).selectExpr(
            f"CASE WHEN id = 2500 AND {str(dies).lower()} THEN raise_error('killed midway') "
            f"ELSE CAST(concat('row-', lpad(CAST(id AS STRING), 5, '0')) AS BINARY) END "
            f"AS body")

    def write(write_id, dies=False):
        rows(dies).write.format("duomq").option("zookeeper", pair.zookeeper) \
            .option("cluster", pair.cluster).option("topic", "Rows") \
            .option("writeId", write_id).mode("append").save()

    with pytest.raises(Exception, match="killed midway"):
        write("nightly-2026-11-24", dies=True)
    first = stored(pair)
    assert 0 < len(first) < 3000 and len(set(first)) == len(first)
    write("nightly-2026-11-24")                     # the rerun
    assert sorted(stored(pair)) == sorted(b"row-%05d" % i for i in range(3000))
    write("nightly-2026-11-24")                     # again: nothing new
    assert len(stored(pair)) == 3000
    write("nightly-2026-11-25")                     # another write of the same rows
    assert len(stored(pair)) == 6000


def test_a_streaming_batch_run_again_after_a_restart_is_stored_once(spark, pair, tmp_path):
    """A query from topic Src into topic Rows. Deleting the checkpoint's
    last commit makes the restarted query run that micro-batch again (as
    after a crash between writing and committing it): the sink sends the
    same batches under the same identity, and nothing is stored twice."""
    pair.create_topic("Src", 2)
    with Producer(zookeeper=pair.zookeeper, cluster=pair.cluster) as p:
        for i in range(0, 600, 100):
            assert p.send_batch([Message("Src", b"s%04d" % j) for j in range(i, i + 100)]).ok
    ck = tmp_path / "ck"

    def run():
        q = spark.readStream.format("duomq").option("zookeeper", pair.zookeeper) \
            .option("cluster", pair.cluster).option("topic", "Src") \
            .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "400") \
            .load().select("body").writeStream.format("duomq") \
            .option("zookeeper", pair.zookeeper).option("cluster", pair.cluster) \
            .option("topic", "Rows").option("checkpointLocation", str(ck)) \
            .trigger(availableNow=True).start()
        q.awaitTermination(120)
        return q

    run()
    assert sorted(stored(pair)) == sorted(b"s%04d" % j for j in range(600))
    commits = sorted((f for f in (ck / "commits").iterdir() if f.name.isdigit()),
                     key=lambda f: int(f.name))
    assert len(commits) >= 2                        # several micro-batches
    commits[-1].unlink()                            # the last one never committed
    crc = ck / "commits" / f".{commits[-1].name}.crc"
    if crc.exists():
        crc.unlink()
    run()                                           # ... so it runs again
    assert len(stored(pair)) == 600
