#!/usr/bin/env python3
"""Spark batch read of a backlog from a slave (local[2]), one JSON line:

  spark_read   1,000,000 messages of 100 B (SPARK_N) read by spark.read.format("duomq")
               pinned to the slave into Spark's noop sink: rows/s, with Spark's start-up
               and the read timed apart; the master's batch produce rate alone and while
               the read runs (the ratio should stay >= 0.9)

Two layouts, each in its own process: "shared" lets Spark, the brokers and the
producer share both cores of this machine; "pinned" puts the master and the
producer on CPU 0, and Spark (driver, JVM, Python workers) with the slave on
CPU 1, as on separate hosts: what the slave pinning protects is the master.
BENCH_QUICK=1: 200,000 messages. SPARK_LAYOUTS="shared pinned".
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from ha_bench import pin_threads  # noqa: E402  (same directory)
from run_all import child, emit, result  # noqa: E402

from duomq.client import PullConsumer  # noqa: E402
from duomq.common.message import MessageQueue  # noqa: E402
from duomq.dev.harness import LocalCluster, wait_for  # noqa: E402
from duomq.dev.zookeeper import launch  # noqa: E402

QUICK = os.environ.get("BENCH_QUICK") == "1"
N = int(os.environ.get("SPARK_N", 200_000 if QUICK else 1_000_000))
QUEUES = 4


def spark_session():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from duomq.client.spark import register
    s = (SparkSession.builder.master("local[2]").appName("duomq-bench")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    register(s)
    return s


def main() -> int:
    if len(sys.argv) > 1:
        return run(sys.argv[1])
    for layout in os.environ.get("SPARK_LAYOUTS", "shared pinned").split():
        subprocess.run([sys.executable, os.path.abspath(__file__), layout], check=True)
    return 0


def run(layout: str) -> int:
    cpus = sorted(os.sched_getaffinity(0))
    near, far = ([cpus[0]], [cpus[-1]]) if layout == "pinned" and len(cpus) > 1 else (None, None)
    zk = launch(os.environ.get("DUOMQ_ZOOKEEPER"))
    base = tempfile.mkdtemp(prefix="duomq-sparkbench-", dir=os.environ.get("BENCH_DIR", "/var/tmp"))
    c = LocalCluster(zk.connect, f"Spark{os.getpid()}", base)
    try:
        c.add_broker("broker-a", 0, replication="ASYNC")
        c.add_broker("broker-a", 1, replication="ASYNC")
        c.create_topic("Backlog", QUEUES)
        c.create_topic("Live", QUEUES)
        ep = ["--zookeeper", zk.connect, "--cluster", c.cluster]
        if near:
            pin_threads(c.brokers[0].pid, near)
            pin_threads(c.brokers[1].pid, far)
            os.sched_setaffinity(0, far)     # Spark's JVM and workers inherit it
        result(child(["produce", *ep, "--topic", "Backlog", "--n", N - 1, "--batch", 256,
                      "--size", 100, "--max-s", 300]))
        probe = {rf: PullConsumer(zk.connect, c.cluster, "probe", read_from=rf)
                 for rf in ("master", "slave")}
        mqs = [MessageQueue("Backlog", "broker-a", q) for q in range(QUEUES)]
        wait_for(lambda: all(probe["slave"].max_offset(mq) == probe["master"].max_offset(mq)
                             for mq in mqs), 60, "the slave to hold the backlog")
        total = sum(probe["slave"].max_offset(mq) for mq in mqs)
        for p in probe.values():
            p.close()

        def produce(secs):
            return result(child(["produce", *ep, "--topic", "Live", "--n", 10**9, "--batch", 256,
                                 "--size", 100, "--max-s", secs], cpus=near))["rate"]

        alone = produce(8)
        t0 = time.monotonic()
        spark = spark_session()
        startup = time.monotonic() - t0
        df = (spark.read.format("duomq").option("zookeeper", zk.connect)
              .option("cluster", c.cluster).option("topic", "Backlog").option("readFrom", "slave")
              .load())
        during = {}
        done = threading.Event()

        def load():   # the producer runs while the read does
            time.sleep(1.0)
            during["rate"] = produce(6)
            done.set()

        t = threading.Thread(target=load)
        t.start()
        t1 = time.monotonic()
        df.write.format("noop").mode("overwrite").save()
        read_s = time.monotonic() - t1
        t.join()
        spark.stop()
        emit(name="spark_read", layout=layout, read_from="slave", body_bytes=100, rows=total,
             spark_startup_s=round(startup, 2), read_s=round(read_s, 2),
             rows_per_s=round(total / read_s, 1), produce_alone=round(alone, 1),
             produce_during_read=round(during["rate"], 1),
             produce_ratio=round(during["rate"] / alone, 3))
    finally:
        c.stop_all()
        zk.stop()
        subprocess.run(["rm", "-rf", base])
    return 0


if __name__ == "__main__":
    sys.exit(main())
