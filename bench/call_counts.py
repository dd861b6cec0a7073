#!/usr/bin/env python3
"""Python calls per message on the e2e path: a deterministic figure for the
hot path's diet, where the timed benchmarks swing with the machine.

The e2e case of run_all (a producer sending RATE messages a second, one
outstanding, to a lone master; a consumer at the queue's end, its pull held,
consume threads CONSUME_THREADS (0: inline)), with every process under
bench/callcount/sitecustomize.py (sys.setprofile on every thread: each
Python function called and each C function called from Python). Run twice,
SHORT and LONG seconds, and the difference over the difference in messages
is what a message costs: start-up and shut-down cancel out.

One JSON line: per role (broker, producer, consumer), Python calls and C
calls per message, calls per message per thread (threads above 0.5), and its
TOP functions by calls per message. Settings: RATE (500), SHORT (4), LONG (12), FLUSH (ASYNC_FLUSH),
TOP (12), SIZE (100), BUSY_POLL_US (0).

What a message costs, not what waiting costs: the busy poll is off (broker
and producer; BUSY_POLL_US sets both), since a spin's calls count its
iterations, which the machine's speed decides. And each message travels
alone: the profiler slows every process several times, and at a rate the
profiled broker does not keep up with, messages share pulls and the
consumer's calls per message fall (2,000/s here: 72 against 131), so RATE
stays low."""

from __future__ import annotations

import collections
import glob
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from run_all import child, result  # noqa: E402

from duomq.dev.zookeeper import launch  # noqa: E402
from duomq.testing.harness import LocalCluster  # noqa: E402

RATE = int(os.environ.get("RATE", 500))
SHORT, LONG = float(os.environ.get("SHORT", 4)), float(os.environ.get("LONG", 12))
BUSY_POLL_US = int(os.environ.get("BUSY_POLL_US", 0))
FLUSH = os.environ.get("FLUSH", "ASYNC_FLUSH")
TOP = int(os.environ.get("TOP", 12))
SIZE = int(os.environ.get("SIZE", 100))
CONSUME_THREADS = int(os.environ.get("CONSUME_THREADS", 0))
ROLES = {"broker": "broker", "latprod": "producer", "consume": "consumer"}


def run(zookeeper: str, secs: float, base: str, prefix: str) -> tuple[int, dict]:
    """One e2e run under the hook: (messages sent, role -> (thread, where,
    function) -> calls)."""
    cluster = LocalCluster(zookeeper, f"cc{os.getpid()}{int(secs * 10)}", base)
    try:
        cluster.add_broker("broker-a", 0, flush=FLUSH, replication="ASYNC",
                           busy_poll_us=BUSY_POLL_US)
        cluster.create_topic("Latency", 1)
        ep = ["--zookeeper", zookeeper, "--cluster", cluster.cluster]
        n = int(RATE * secs)
        cons = child(["consume", *ep, "--topic", "Latency", "--latency", "--consume-from",
                      "last", "--expect", n, "--queues", 1, "--group", "callcount",
                      "--idle-s", 3, "--consume-threads", CONSUME_THREADS], ready=True)
        prod = result(child(["latprod", *ep, "--topic", "Latency", "--rate", RATE,
                             "--secs", secs, "--size", SIZE]))
        result(cons)
    finally:
        cluster.stop_all()
    counts: dict = collections.defaultdict(collections.Counter)
    for path in glob.glob(prefix + ".*"):
        role = ROLES.get(path[len(prefix) + 1:].split(".")[0])
        with open(path) as f:
            for line in f:
                calls, thread, where, func = line.rstrip("\n").split("\t")
                if role is not None:
                    counts[role][(thread, where, func)] += int(calls)
        os.remove(path)
    return prod["n"], counts


def main() -> int:
    zk = launch(os.environ.get("DUOMQ_ZOOKEEPER"))
    base = tempfile.mkdtemp(prefix="duomq-callcount-", dir=os.environ.get("BENCH_DIR", "/var/tmp"))
    prefix = os.path.join(base, "calls")
    # every child (the broker, the roles) loads the hook; this process does not
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (os.path.join(HERE, "callcount"), os.environ.get("PYTHONPATH")) if p)
    os.environ["DUOMQ_CALLCOUNT"] = prefix
    producer = json.loads(os.environ.get("PRODUCER_SETTINGS", "{}"))   # (roles.py's)
    os.environ["PRODUCER_SETTINGS"] = json.dumps({"busy_poll_us": BUSY_POLL_US, **producer})
    try:
        n_short, short = run(zk.connect, SHORT, os.path.join(base, "short"), prefix)
        n_long, long = run(zk.connect, LONG, os.path.join(base, "long"), prefix)
    finally:
        zk.stop()
        shutil.rmtree(base, ignore_errors=True)
    msgs = n_long - n_short
    out: dict = {"name": "call_counts", "flush": FLUSH, "rate_per_s": RATE,
                 "consume_threads": CONSUME_THREADS, "busy_poll_us": BUSY_POLL_US,
                 "messages": msgs}
    for role in ("broker", "producer", "consumer"):
        diff = long[role]
        diff.subtract(short[role])
        threads: collections.Counter = collections.Counter()
        funcs: collections.Counter = collections.Counter()
        py = c = 0
        for (thread, where, func), calls in diff.items():
            threads[thread] += calls
            funcs[f"{where}:{func}"] += calls
            if where == "C":
                c += calls
            else:
                py += calls
        out[role] = {
            "python_calls_per_msg": round(py / msgs, 1),
            "c_calls_per_msg": round(c / msgs, 1),
            "threads": {t: round(n / msgs, 1) for t, n in threads.most_common()
                        if n / msgs > 0.5},
            "top": [[f, round(n / msgs, 2)] for f, n in funcs.most_common(TOP)]}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
