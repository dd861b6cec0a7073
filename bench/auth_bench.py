#!/usr/bin/env python3
"""The cost of a secured cluster, in one sitting: batch produce (200,000 x
100 B in stop-and-wait batches of 256), a backlog consume (a new consumer
process reads them) and e2e latency (2,000 msg/s for 3 s), with ``auth =
true`` (CURVE on every socket, the admin's credentials, every request
checked) or plaintext, rounds alternated: against a lone ASYNC_FLUSH master,
or (MODE=sync) a SYNC + SYNC_FLUSH pair, whose acks also wait for the
slave over the secured replication port. One JSON line: per round the
figures, then the medians and the ratios (issue 21's target: batch and
backlog at least 0.85x).

ROUNDS=4 by default; N=... sets the messages; BENCH_QUICK=1: 2 rounds of 50,000.
"""

from __future__ import annotations

import json
import os
import sys

from one_broker import alternated, medians
from run_all import child, result

from duomq.auth.credentials import init_cluster_keys
from duomq.testing.harness import LocalCluster

QUICK = os.environ.get("BENCH_QUICK") == "1"
ROUNDS = int(os.environ.get("ROUNDS", 2 if QUICK else 4))
N = int(os.environ.get("N", 50_000 if QUICK else 200_000))
QUEUES = 4
LAT_RATE, LAT_SECS = 2000, 3
SYNC = os.environ.get("MODE", "async") == "sync"


def one(zk: str, base: str, i: int, auth: bool) -> dict:
    settings: dict = {"flush": "SYNC_FLUSH", "replication": "SYNC"} if SYNC else \
        {"flush": "ASYNC_FLUSH"}
    if auth:
        keys = os.path.join(base, f"keys{i}")
        os.environ["DUOMQ_CREDENTIALS"] = init_cluster_keys(keys)   # the children's clients
        settings.update(auth=True, auth_dir=keys)
    else:
        os.environ.pop("DUOMQ_CREDENTIALS", None)
    cluster = LocalCluster(zk, f"AuthBench{os.getpid()}x{i}", os.path.join(base, str(i)))
    cluster.add_broker("broker-a", 0, **settings)
    if SYNC:
        cluster.add_broker("broker-a", 1, **settings)
    ep = ["--zookeeper", zk, "--cluster", cluster.cluster]
    try:
        for topic in ("Backlog", "Latency"):
            cluster.create_topic(topic, QUEUES)
        p = result(child(["produce", *ep, "--topic", "Backlog", "--n", N, "--batch", 256,
                          "--size", 100, "--max-s", 120]))
        c = result(child(["consume", *ep, "--topic", "Backlog", "--expect", p["n"] + 1,
                          "--queues", QUEUES, "--group", "backlog-reader"], ready=True))
        cons = child(["consume", *ep, "--topic", "Latency", "--latency", "--consume-from", "last",
                      "--expect", LAT_RATE * LAT_SECS, "--warmup-n", LAT_RATE, "--queues", QUEUES,
                      "--group", "latency-reader", "--idle-s", 5], ready=True)
        result(child(["latprod", *ep, "--topic", "Latency", "--rate", LAT_RATE, "--secs",
                      LAT_SECS, "--size", 100]))
        lat = result(cons)["lat"]
    finally:
        cluster.stop_all()
    return {"auth": auth, "produce_batch256": round(p["rate"]),
            "consume_backlog": round(c["rate"]), "e2e_p50_us": lat["p50_us"],
            "e2e_p99_us": lat["p99_us"]}


def main() -> int:
    rounds = alternated("auth-bench", ROUNDS, one)
    out: dict = {"bench": "auth_cost", "messages": N, "body_bytes": 100,
                 "brokers": "SYNC + SYNC_FLUSH pair" if SYNC else "ASYNC_FLUSH master",
                 "rounds": rounds,
                 **medians(rounds, "auth", ("produce_batch256", "consume_backlog",
                                            "e2e_p50_us", "e2e_p99_us"),
                           "auth_median", "plaintext_median")}
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
