"""The streaming job: shop events read from slaves, aggregated per minute of
event time, appended to Parquet with a checkpoint.

    python -m pipeline.minutes --out /data/minutes --checkpoint /data/ckpt

Each run with ``--available-now`` reads what the topic holds, writes every
minute the watermark has closed, and stops; the next run resumes from the
checkpoint, so every event counts once. Without it the query runs until
stopped, a micro-batch every ``--trigger`` seconds.
"""

from __future__ import annotations

import argparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from duomq.client.spark import local_session

from . import add_cluster_options

EVENT = StructType([StructField("type", StringType()), StructField("user", StringType()),
                    StructField("item", StringType()), StructField("country", StringType()),
                    StructField("amount_cents", LongType()), StructField("ts", LongType())])
WATERMARK = "2 minutes"
WATERMARK_MS = 120_000


def parse_events(df: DataFrame) -> DataFrame:
    """duomq rows to typed events with an event-time column."""
    return (df.select(F.from_json(F.col("body").cast("string"), EVENT).alias("e"))
            .select("e.*").withColumn("event_time", F.timestamp_millis("ts")))


def per_minute(events_df: DataFrame) -> DataFrame:
    return (events_df.withWatermark("event_time", WATERMARK)
            .groupBy(F.window("event_time", "1 minute"))
            .agg(F.count(F.when(F.col("type") == "click", 1)).alias("clicks"),
                 F.count(F.when(F.col("type") == "order", 1)).alias("orders"),
                 F.coalesce(F.sum(F.when(F.col("type") == "order", F.col("amount_cents"))),
                            F.lit(0)).alias("revenue_cents"))
            .select(F.col("window.start").alias("minute"), "clicks", "orders",
                    "revenue_cents"))


def start(spark: SparkSession, zookeeper: str, cluster: str, topic: str, out: str,
          checkpoint: str, available_now: bool = True, trigger_s: int = 10,
          max_per_trigger: int = 50_000):
    source = (spark.readStream.format("duomq")
              .option("zookeeper", zookeeper).option("cluster", cluster)
              .option("topic", topic)
              .option("readFrom", "slave")                 # heavy reads stay off the master
              .option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", str(max_per_trigger))
              .option("consumerGroup", "minute-aggregator")   # lag shows in `duomq status`
              .load())
    writer = (per_minute(parse_events(source)).writeStream.format("parquet")
              .option("path", out).option("checkpointLocation", checkpoint)
              .outputMode("append"))
    writer = writer.trigger(availableNow=True) if available_now \
        else writer.trigger(processingTime=f"{trigger_s} seconds")
    return writer.start()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_cluster_options(ap)
    ap.add_argument("--out", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--available-now", action="store_true")
    ap.add_argument("--trigger", type=int, default=10, help="seconds between micro-batches")
    ap.add_argument("--ui-port", type=int, help="serve Spark's web UI and REST API here, on "
                    "127.0.0.1 (a pod's probes ask it); default: no UI")
    a = ap.parse_args(argv)
    spark = local_session("duomq-minutes", ui_port=a.ui_port)
    query = start(spark, a.zookeeper, a.cluster, a.topic, a.out, a.checkpoint,
                  a.available_now, a.trigger)
    query.awaitTermination()
    spark.read.parquet(a.out).orderBy("minute").show(1000, truncate=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
