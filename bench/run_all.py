#!/usr/bin/env python3
"""The peers' workloads (../shared/peers) against one duomq master, in
ASYNC_FLUSH and SYNC_FLUSH: one JSON line per figure.

  produce_sync1     20,000 messages, one outstanding (capped at 30 s)
  produce_batch256  200,000 messages in stop-and-wait batches of 256
  consume_backlog   a new consumer process reads the 200,000-message backlog
  e2e_latency       consumer subscribed first; 2,000 msg/s for 10 s; first 1 s dropped
  consume_backlog_pool, e2e_latency_pool   the same with a pool of 20 consume threads

Consumers run the handler on the thread that reads the pull answers
(CONSUME_THREADS, default 0: ``consume_threads = 0``), as the peers'
harness consumers do (Redis's XREADGROUP loop, NATS's callback); the _pool
figures show the push consumer's default, 20 threads, each message handed
to one (POOL=0 leaves them out).

BENCH_QUICK=1: a one-minute subset (fewer messages, 100 B only, 3 s latency run).
Modes: ASYNC_FLUSH and SYNC_FLUSH on a lone master, then a master and a slave with
ASYNC replication + ASYNC_FLUSH and SYNC replication + SYNC_FLUSH. A mode is
FLUSH/REPLICATION, or FLUSH/REPLICATION/SLAVE_FLUSH for a slave that flushes
otherwise than its master (SYNC_FLUSH/SYNC/ASYNC_FLUSH: the master syncs each
send, the slave acks once it holds it in memory, as Redis's AOF always + WAIT 1).
Knobs: SIZES="100 1024", MODES="ASYNC_FLUSH/NONE SYNC_FLUSH/SYNC ...", N_SYNC, N_BACKLOG, LAT_SECS,
BROKER_SETTINGS (JSON of broker config fields).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from duomq.dev.zookeeper import launch
from duomq.testing.harness import LocalCluster

HERE = os.path.dirname(os.path.abspath(__file__))
QUICK = os.environ.get("BENCH_QUICK") == "1"
SIZES = [int(s) for s in os.environ.get("SIZES", "100" if QUICK else "100 1024").split()]
# flush/replication pairs; a replicated mode runs a master and one slave
MODES = [tuple(m.split("/")) for m in os.environ.get(
    "MODES", "ASYNC_FLUSH/NONE SYNC_FLUSH/NONE ASYNC_FLUSH/ASYNC SYNC_FLUSH/SYNC").split()]
N_SYNC = int(os.environ.get("N_SYNC", 3000 if QUICK else 20000))
N_BACKLOG = int(os.environ.get("N_BACKLOG", 50000 if QUICK else 200000))
LAT_RATE = int(os.environ.get("LAT_RATE", 2000))
LAT_SECS = float(os.environ.get("LAT_SECS", 3 if QUICK else 10))
QUEUES = 4
# e.g. BROKER_SETTINGS='{"segment_size_bytes": 67108864}'
BROKER_SETTINGS = json.loads(os.environ.get("BROKER_SETTINGS", "{}"))
CONSUME_THREADS = int(os.environ.get("CONSUME_THREADS", 0))
POOL = os.environ.get("POOL", "1") != "0"
POOL_THREADS = 20


def child(args, ready=False, cpus=None):
    """A roles.py process; ``cpus``: pin it to these CPUs (``taskset -c``)."""
    pin = ["taskset", "-c", ",".join(map(str, cpus))] if cpus else []
    p = subprocess.Popen([*pin, sys.executable, os.path.join(HERE, "roles.py"), *map(str, args)],
                         stdout=subprocess.PIPE, text=True)
    if ready:
        for line in p.stdout:
            if line.strip() == "READY":
                break
    return p


def result(p, timeout=600):
    out, _ = p.communicate(timeout=timeout)
    for line in reversed(out.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError("benchmark child produced no result")


def emit(**fields):
    print(json.dumps(fields), flush=True)


def run_mode(zk, flush: str, replication: str, size: int, base: str,
             slave_flush: str | None = None) -> None:
    name = f"{flush}-{replication}-{slave_flush or ''}-{size}"
    cluster = LocalCluster(zk, f"Bench{os.getpid()}{flush[:1]}{replication[:1]}"
                               f"{(slave_flush or '')[:1]}{size}", os.path.join(base, name))
    repl = "ASYNC" if replication == "NONE" else replication
    settings = {**BROKER_SETTINGS, **({"slave_flush": slave_flush} if slave_flush else {})}
    cluster.add_broker("broker-a", 0, flush=flush, replication=repl, **settings)
    if replication != "NONE":
        cluster.add_broker("broker-a", 1, flush=flush, replication=repl, **settings)
    common = {"flush": flush, "replication": replication, "body_bytes": size,
              **({"slave_flush": slave_flush} if slave_flush else {})}
    ep = ["--zookeeper", zk, "--cluster", cluster.cluster]
    try:
        for topic in ("Sync1", "Backlog", "Latency"):
            cluster.create_topic(topic, QUEUES)
        r = result(child(["produce", *ep, "--topic", "Sync1", "--n", N_SYNC, "--batch", 1,
                          "--size", size, "--max-s", 30]))
        emit(name="produce_sync1", **common, msgs_per_s=round(r["rate"], 1), n=r["n"],
             ack_p50_us=r["ack"]["p50_us"], ack_p99_us=r["ack"]["p99_us"], errors=r["errors"],
             statuses=r["statuses"], spins=r["spins"], spins_caught=r["spins_caught"])
        r = result(child(["produce", *ep, "--topic", "Backlog", "--n", N_BACKLOG, "--batch", 256,
                          "--size", size, "--max-s", 120]))
        emit(name="produce_batch256", **common, msgs_per_s=round(r["rate"], 1), n=r["n"],
             errors=r["errors"], statuses=r["statuses"])
        backlog = r["n"] + 1  # + the warm-up message
        runs = [("", CONSUME_THREADS)] + ([("_pool", POOL_THREADS)] if POOL else [])
        for suffix, threads in runs:
            r = result(child(["consume", *ep, "--topic", "Backlog", "--expect", backlog,
                              "--queues", QUEUES, "--group", f"backlog-reader{suffix}",
                              "--consume-threads", threads], ready=True))
            emit(name=f"consume_backlog{suffix}", **common, consume_threads=threads,
                 msgs_per_s=round(r["rate"], 1), n=r["n"])
        for suffix, threads in runs:
            cons = child(["consume", *ep, "--topic", "Latency", "--latency", "--consume-from",
                          "last", "--expect", int(LAT_RATE * LAT_SECS), "--warmup-n", LAT_RATE,
                          "--queues", QUEUES, "--group", f"latency-reader{suffix}", "--idle-s", 5,
                          "--consume-threads", threads], ready=True)
            prod = result(child(["latprod", *ep, "--topic", "Latency", "--rate", LAT_RATE,
                                 "--secs", LAT_SECS, "--size", size]))
            r = result(cons)
            emit(name=f"e2e_latency{suffix}", **common, consume_threads=threads,
                 rate_per_s=LAT_RATE, achieved_rate=round(prod["rate"], 1),
                 p50_us=r["lat"]["p50_us"], p99_us=r["lat"]["p99_us"],
                 p999_us=r["lat"]["p999_us"], samples=r["lat"]["samples"])
    finally:
        cluster.stop_all()
        # each broker preallocates a 1 GiB segment: five modes' worth at once
        # filled this machine's disk (the last mode's slave could not store)
        subprocess.run(["rm", "-rf", os.path.join(base, name)])


def main() -> int:
    zk = launch(os.environ.get("DUOMQ_ZOOKEEPER"))
    base = tempfile.mkdtemp(prefix="duomq-bench-", dir=os.environ.get("BENCH_DIR", "/var/tmp"))
    t0 = time.monotonic()
    try:
        for flush, replication, *slave_flush in MODES:
            for size in SIZES:
                run_mode(zk.connect, flush, replication, size, base, *slave_flush)
    finally:
        zk.stop()
        subprocess.run(["rm", "-rf", base])
    print(f"# benchmarks took {time.monotonic() - t0:.0f} s, load {os.getloadavg()[0]:.2f}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
