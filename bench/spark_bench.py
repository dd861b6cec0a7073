#!/usr/bin/env python3
"""Spark batch read of a backlog from a slave (local[2]), one JSON line:

  spark_read   1,000,000 messages of 100 B (SPARK_N) read by spark.read.format("duomq")
               pinned to the slave into Spark's noop sink, twice: Spark's session
               start-up, the first read (which also starts the Python workers and
               warms the JIT) and the second, warm read are timed apart. A batch
               producer writes to the master throughout both reads; its rate over
               exactly each read, from the master's offsets, is compared with its
               rate alone (before Spark starts and after it stops): the ratio should
               stay >= 0.9

Two layouts, each in its own process: "shared" lets Spark, the brokers and the
producer share both cores of this machine; "pinned" puts the master and the
producer on CPU 0, and Spark (driver, JVM, Python workers) with the slave on
CPU 1, as on separate hosts: what the slave pinning protects is the master.
BENCH_QUICK=1: 200,000 messages. SPARK_LAYOUTS="shared pinned".
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from ha_bench import pin_threads  # noqa: E402  (same directory)
from run_all import child, emit, result  # noqa: E402

from duomq.client import PullConsumer  # noqa: E402
from duomq.client.spark import local_session  # noqa: E402
from duomq.common.message import MessageQueue  # noqa: E402
from duomq.dev.zookeeper import launch  # noqa: E402
from duomq.testing.harness import LocalCluster, wait_for, wait_slaves_hold  # noqa: E402

QUICK = os.environ.get("BENCH_QUICK") == "1"
N = int(os.environ.get("SPARK_N", 200_000 if QUICK else 1_000_000))
QUEUES = 4


def main() -> int:
    if len(sys.argv) > 1:
        return run(sys.argv[1])
    for layout in os.environ.get("SPARK_LAYOUTS", "shared pinned").split():
        subprocess.run([sys.executable, os.path.abspath(__file__), layout], check=True)
    return 0


def produced(probe, mqs) -> int:
    """Messages stored so far on the Live topic, from the master's offsets."""
    return sum(probe.max_offset(mq) for mq in mqs)


@contextlib.contextmanager
def live_producer(ep, cpus, probe, mqs):
    """A batch producer on the Live topic, running at full speed; yields a
    counter of stored messages, so a window's rate is measured exactly."""
    p = child(["produce", *ep, "--topic", "Live", "--n", 10**12, "--batch", 256, "--size", 100,
               "--max-s", 900], cpus=cpus)
    try:
        first = produced(probe, mqs)
        wait_for(lambda: produced(probe, mqs) > first, 30, "the producer to start")
        time.sleep(1.0)
        yield lambda: produced(probe, mqs)
    finally:
        p.kill()
        p.wait()


def timed(count, fn):
    """Run fn; its seconds and the producer's rate over exactly that time."""
    c0, t0 = count(), time.monotonic()
    fn()
    secs = time.monotonic() - t0
    return secs, (count() - c0) / secs


def run(layout: str) -> int:
    cpus = sorted(os.sched_getaffinity(0))
    near, far = ([cpus[0]], [cpus[-1]]) if layout == "pinned" and len(cpus) > 1 else (None, None)
    zk = launch(os.environ.get("DUOMQ_ZOOKEEPER"))
    base = tempfile.mkdtemp(prefix="duomq-sparkbench-", dir=os.environ.get("BENCH_DIR", "/var/tmp"))
    c = LocalCluster(zk.connect, f"Spark{os.getpid()}", base)
    probes = []
    try:
        c.add_broker("broker-a", 0, replication="ASYNC")
        c.add_broker("broker-a", 1, replication="ASYNC")
        c.create_topic("Backlog", QUEUES)
        c.create_topic("Live", QUEUES)
        ep = ["--zookeeper", zk.connect, "--cluster", c.cluster]
        if near:
            pin_threads(c.brokers[0].pid, near)
            pin_threads(c.brokers[1].pid, far)
            os.sched_setaffinity(0, far)     # Spark's JVM and workers, and the probes, inherit it
        result(child(["produce", *ep, "--topic", "Backlog", "--n", N - 1, "--batch", 256,
                      "--size", 100, "--max-s", 300]))
        total = wait_slaves_hold(zk.connect, c.cluster, "Backlog", 60)
        master = PullConsumer("probe", zookeeper=zk.connect, cluster=c.cluster, read_from="master")
        probes.append(master)
        live = [MessageQueue("Live", "broker-a", q) for q in range(QUEUES)]

        def alone() -> float:
            with live_producer(ep, near, master, live) as count:
                return timed(count, lambda: time.sleep(6))[1]

        before = alone()
        t0 = time.monotonic()
        spark = local_session("duomq-bench")
        startup = time.monotonic() - t0
        df = (spark.read.format("duomq").option("zookeeper", zk.connect)
              .option("cluster", c.cluster).option("topic", "Backlog").option("readFrom", "slave")
              .load())

        def read():
            df.write.format("noop").mode("overwrite").save()

        with live_producer(ep, near, master, live) as count:
            cold_s, cold_rate = timed(count, read)     # Python workers start, the JIT warms
            warm_s, warm_rate = timed(count, read)
        spark.stop()
        after = alone()
        base_rate = (before + after) / 2
        emit(name="spark_read", layout=layout, read_from="slave", body_bytes=100, rows=total,
             spark_startup_s=round(startup, 2),
             first_read_s=round(cold_s, 2), first_rows_per_s=round(total / cold_s, 1),
             warm_read_s=round(warm_s, 2), warm_rows_per_s=round(total / warm_s, 1),
             produce_alone=round(base_rate, 1), produce_alone_before_after=[round(before, 1),
                                                                            round(after, 1)],
             produce_during_first_read=round(cold_rate, 1),
             produce_during_warm_read=round(warm_rate, 1),
             produce_ratio_first=round(cold_rate / base_rate, 3),
             produce_ratio_warm=round(warm_rate / base_rate, 3))
    finally:
        for p in probes:
            p.close()
        c.stop_all()
        zk.stop()
        subprocess.run(["rm", "-rf", base], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
