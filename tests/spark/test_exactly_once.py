"""The Spark sink writes each row once (local[2], a real broker pair): a
batch write killed midway (a task fails, so does the job) and run again
with the same ``writeId`` stores every row exactly once; the same rows
written under another writeId are a new write."""

import pytest

from duomq.client import PullConsumer

pytestmark = pytest.mark.integration


@pytest.fixture
def pair(local_cluster):
    local_cluster.add_broker("broker-a", 0, replication="SYNC")
    local_cluster.add_broker("broker-a", 1, replication="SYNC")
    local_cluster.create_topic("Rows", 4)
    return local_cluster


def stored(cluster) -> list[bytes]:
    out = []
    with PullConsumer(cluster.zookeeper, cluster.cluster, "audit") as c:
        for mq in c.queues("Rows"):
            off = 0
            while (r := c.pull(mq, off, 1000)).messages:
                out += [m.body for m in r.messages]
                off = r.next_offset
    return out


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
