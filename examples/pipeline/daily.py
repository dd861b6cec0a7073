"""The batch job: one day of shop events, selected by store timestamp, read
from slaves and reported per country.

    python -m pipeline.daily --day 2026-11-22 [--out /data/daily]

``--since``/``--until`` (ISO times, UTC) select another range.
"""

from __future__ import annotations

import argparse
import datetime as dt

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from duomq.client.spark import local_session

from . import add_cluster_options
from .minutes import parse_events


def day_range(day: str) -> tuple[int, int]:
    """[midnight, next midnight) of a UTC day, in ms."""
    start = dt.datetime.fromisoformat(day).replace(tzinfo=dt.UTC)
    end = start + dt.timedelta(days=1)
    return int(start.timestamp() * 1000), int(end.timestamp() * 1000)


def read_range(spark: SparkSession, zookeeper: str, cluster: str, topic: str,
               since_ms: int, until_ms: int) -> DataFrame:
    return (spark.read.format("duomq")
            .option("zookeeper", zookeeper).option("cluster", cluster).option("topic", topic)
            .option("readFrom", "slave")
            .option("startingTimestamp", str(since_ms))
            # a queue with nothing since then is read from its end, not an error
            .option("startingOffsetsByTimestampStrategy", "latest")
            .option("endingTimestamp", str(until_ms))
            .load())


def per_country(df: DataFrame) -> DataFrame:
    return (parse_events(df).groupBy("country")
            .agg(F.count(F.when(F.col("type") == "click", 1)).alias("clicks"),
                 F.count(F.when(F.col("type") == "order", 1)).alias("orders"),
                 F.sum("amount_cents").alias("revenue_cents"))
            .orderBy("country"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_cluster_options(ap)
    ap.add_argument("--day", default=dt.datetime.now(dt.UTC).date().isoformat())
    ap.add_argument("--since", help="ISO time, UTC (instead of --day)")
    ap.add_argument("--until", help="ISO time, UTC (instead of --day)")
    ap.add_argument("--out", help="also write the report as Parquet here")
    a = ap.parse_args(argv)
    since, until = day_range(a.day)
    if a.since:
        since = int(dt.datetime.fromisoformat(a.since).replace(tzinfo=dt.UTC)
                    .timestamp() * 1000)
    if a.until:
        until = int(dt.datetime.fromisoformat(a.until).replace(tzinfo=dt.UTC)
                    .timestamp() * 1000)
    spark = local_session("duomq-daily")
    report = per_country(read_range(spark, a.zookeeper, a.cluster, a.topic, since, until))
    report.show(truncate=False)
    if a.out:
        report.write.mode("overwrite").parquet(a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
