#!/usr/bin/env python3
"""High-availability benchmarks, one JSON line each:

  replication_lag   slave lag (bytes) sampled every 50 ms under batch produce, ASYNC replication
  slave_catch_up    a slave started 1 GiB behind (BENCH_QUICK: 256 MiB): MB/s until caught up
  cold_reader       batch produce rate alone (before and after), then while a consumer reads
                    a cold backlog (redirected to the slave); the ratio should stay >= 0.9.
                    Measured twice: "pinned" puts the master and the producer on CPU 0 and
                    the slave and the reader on CPU 1 (as on separate hosts: what the
                    redirect protects is the master's disk and page cache), "shared" lets
                    all of them share both cores of this machine
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time

import psutil

from duomq.client import Message, Producer
from duomq.client.remoting import RemotingClient
from duomq.dev.zookeeper import launch
from duomq.proto import pb
from duomq.testing.harness import LocalCluster, drop_page_cache

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run_all import child, emit, result  # noqa: E402  (same directory)

QUICK = os.environ.get("BENCH_QUICK") == "1"
CATCH_UP_BYTES = int(os.environ.get("CATCH_UP_BYTES", (256 if QUICK else 1024) << 20))
SEG = {"segment_size_bytes": 64 << 20}


def status(remoting, address):
    return remoting.call(address, pb.BROKER_STATUS, pb.BrokerStatusRequest(), 5)[2]


def fill(zk, cluster, topic, nbytes, size=1024):
    body = b"x" * size
    per_batch = 256 * (size + 80)
    with Producer(zookeeper=zk, cluster=cluster) as p:
        for _ in range(max(1, nbytes // per_batch)):
            p.send_batch([Message(topic, body)] * 256)


def replication_lag(zk, base):
    c = LocalCluster(zk, f"Lag{os.getpid()}", os.path.join(base, "lag"))
    master = c.add_broker("broker-a", 0, replication="ASYNC", **SEG)
    c.add_broker("broker-a", 1, replication="ASYNC", **SEG)
    c.create_topic("Lag", 4)
    samples, stop = [], threading.Event()
    remoting = RemotingClient("lag-probe")

    def sample():
        while not stop.wait(0.05):
            st = status(remoting, master.address)
            if st.replicas:
                samples.append(max(r.lag_bytes for r in st.replicas))
    t = threading.Thread(target=sample)
    t.start()
    try:
        r = result(child(["produce", "--zookeeper", zk, "--cluster", c.cluster, "--topic", "Lag",
                          "--n", 200_000, "--batch", 256, "--size", 100, "--max-s", 60]))
    finally:
        stop.set()
        t.join()
        remoting.close()
        c.stop_all()
    samples.sort()
    emit(name="replication_lag", flush="ASYNC_FLUSH", replication="ASYNC", body_bytes=100,
         msgs_per_s=round(r["rate"], 1), lag_p50_bytes=samples[len(samples) // 2] if samples else None,
         lag_max_bytes=samples[-1] if samples else None, samples=len(samples))


def catch_up(zk, base):
    c = LocalCluster(zk, f"Catch{os.getpid()}", os.path.join(base, "catch"))
    master = c.add_broker("broker-a", 0, replication="ASYNC", **SEG)
    c.create_topic("Behind", 4)
    fill(zk, c.cluster, "Behind", CATCH_UP_BYTES)
    remoting = RemotingClient("catch-probe")
    try:
        end = status(remoting, master.address).max_physical_offset
        slave = c.add_broker("broker-a", 1, replication="ASYNC", start=False, **SEG)
        slave.start(wait=False)
        first = None                # (time, offset) of the first replicated bytes seen
        while True:
            try:
                got = status(remoting, slave.address).max_physical_offset
            except Exception:
                got = 0             # not serving yet
            now = time.monotonic()
            if got and first is None:
                first = (now, got)
            if got >= end:
                break
            time.sleep(0.02)
        el = now - first[0]
        copied = end - first[1]
    finally:
        remoting.close()
        c.stop_all()
    emit(name="slave_catch_up", flush="ASYNC_FLUSH", replication="ASYNC", body_bytes=1024,
         behind_bytes=end, measured_bytes=copied, seconds=round(el, 3),
         mb_per_s=round(copied / el / 1e6, 1) if el > 0 else None)


def pin_threads(pid: int, cpus) -> None:
    """Pin every thread of a running process (sched_setaffinity is per thread)."""
    for t in psutil.Process(pid).threads():
        os.sched_setaffinity(t.id, cpus)


def cold_reader(zk, base):
    c = LocalCluster(zk, f"Cold{os.getpid()}", os.path.join(base, "cold"))
    master = c.add_broker("broker-a", 0, replication="ASYNC", **SEG)
    slave = c.add_broker("broker-a", 1, replication="ASYNC", promotable="false", **SEG)
    c.create_topic("Backlog", 4)
    c.create_topic("Live", 4)
    backlog = CATCH_UP_BYTES // 2
    fill(zk, c.cluster, "Backlog", backlog)
    remoting = RemotingClient("cold-probe")
    ep = ["--zookeeper", zk, "--cluster", c.cluster]
    secs = 5 if QUICK else 10
    all_cpus = sorted(os.sched_getaffinity(0))
    pinned = len(all_cpus) >= 2
    try:
        end = status(remoting, master.address).max_physical_offset
        while status(remoting, slave.address).max_physical_offset < end:
            time.sleep(0.05)
        for layout in (["pinned"] if pinned else []) + ["shared"]:
            near, far = ([all_cpus[0]], [all_cpus[1]]) if layout == "pinned" else (None, None)
            master.restart()                   # nothing mapped ...
            drop_page_cache(os.path.join(master.data_dir, "store", "commitlog"))   # ... nor cached
            for b, cpus in ((master, near), (slave, far)):
                pin_threads(b.pid, cpus or all_cpus)

            def produce(cpus):
                return result(child(["produce", *ep, "--topic", "Live", "--n", 10**9, "--batch",
                                     256, "--size", 100, "--max-s", secs], cpus=cpus))["rate"]

            before = produce(near)
            reader = child(["consume", *ep, "--topic", "Backlog", "--queues", 4, "--expect",
                            10**9, "--group", f"cold-reader-{layout}", "--idle-s", 3],
                           ready=True, cpus=far)
            loaded = produce(near)
            read = result(reader)
            after = produce(near)
            alone = (before + after) / 2
            emit(name="cold_reader", layout=layout, flush="ASYNC_FLUSH", replication="ASYNC",
                 body_bytes=100, msgs_per_s_alone=round(alone, 1),
                 msgs_per_s_alone_before_after=[round(before, 1), round(after, 1)],
                 msgs_per_s_with_reader=round(loaded, 1), ratio=round(loaded / alone, 3),
                 reader_msgs=read["n"], reader_secs=round(read["secs"], 2),
                 reader_msgs_per_s=round(read["rate"], 1),
                 reads_by_broker=read.get("reads_by_broker"), backlog_bytes=backlog)
    finally:
        remoting.close()
        c.stop_all()


def main() -> int:
    zk = launch(os.environ.get("DUOMQ_ZOOKEEPER"))
    base = tempfile.mkdtemp(prefix="duomq-habench-", dir=os.environ.get("BENCH_DIR", "/var/tmp"))
    try:
        replication_lag(zk.connect, base)
        catch_up(zk.connect, base)
        cold_reader(zk.connect, base)
    finally:
        zk.stop()
        subprocess.run(["rm", "-rf", base])
    return 0


if __name__ == "__main__":
    sys.exit(main())
