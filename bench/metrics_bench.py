#!/usr/bin/env python3
"""The cost of the brokers' metrics, in one sitting: batch produce (200,000
x 100 B in stop-and-wait batches of 256) and a backlog consume (a new
consumer process reads them), against a lone ASYNC_FLUSH master with
``metrics_port`` on (and scraped four times a second, harder than a
Prometheus would) or off (``-1``), rounds alternated. One JSON line: per round the rates, then the
medians and the on/off ratios (issue 20's target: at least 0.97x).

ROUNDS=6 by default; N=... sets the messages; BENCH_QUICK=1: 3 rounds of 50,000.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import urllib.request

from one_broker import alternated, medians
from run_all import child, result

from duomq.testing.harness import LocalCluster

QUICK = os.environ.get("BENCH_QUICK") == "1"
ROUNDS = int(os.environ.get("ROUNDS", 3 if QUICK else 6))
N = int(os.environ.get("N", 50_000 if QUICK else 200_000))
QUEUES = 4
SCRAPE_EVERY_S = 0.25    # harder than Prometheus's usual 15 s, or the tests' 1 s


def scraper(url: str, stop: threading.Event, scrapes: list[int]) -> None:
    while not stop.wait(SCRAPE_EVERY_S):
        with urllib.request.urlopen(url, timeout=5) as r:
            r.read()
        scrapes[0] += 1


def one(zk: str, base: str, i: int, metrics: bool) -> dict:
    cluster = LocalCluster(zk, f"MetricsBench{os.getpid()}x{i}", os.path.join(base, str(i)))
    b = cluster.add_broker("broker-a", 0, flush="ASYNC_FLUSH",
                           metrics_port=0 if metrics else -1)
    stop, scrapes = threading.Event(), [0]
    t = None
    if metrics:
        t = threading.Thread(target=scraper, daemon=True, args=(
            f"http://127.0.0.1:{b.metrics_port}/metrics", stop, scrapes))
        t.start()
    ep = ["--zookeeper", zk, "--cluster", cluster.cluster]
    try:
        cluster.create_topic("Backlog", QUEUES)
        p = result(child(["produce", *ep, "--topic", "Backlog", "--n", N, "--batch", 256,
                          "--size", 100, "--max-s", 120]))
        c = result(child(["consume", *ep, "--topic", "Backlog", "--expect", p["n"] + 1,
                          "--queues", QUEUES, "--group", "backlog-reader"], ready=True))
    finally:
        stop.set()
        if t is not None:
            t.join(10)
        cluster.stop_all()
    return {"metrics": metrics, "produce_batch256": round(p["rate"]),
            "consume_backlog": round(c["rate"]), "scrapes": scrapes[0]}


def main() -> int:
    rounds = alternated("metrics-bench", ROUNDS, one)
    out: dict = {"bench": "metrics_cost", "messages": N, "body_bytes": 100, "rounds": rounds,
                 **medians(rounds, "metrics", ("produce_batch256", "consume_backlog"),
                           "on_median", "off_median")}
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
