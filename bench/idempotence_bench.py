#!/usr/bin/env python3
"""The cost of idempotent sends, in one sitting: batch produce (N x 100 B in
stop-and-wait batches of 256) and one outstanding send (ONE sends in a
row), against a lone ASYNC_FLUSH master, with the producer's ``idempotent``
on (the default: each batch numbered, its first record carrying the
sequence, the broker looking it up) or off, rounds alternated. One JSON
line: per round the rates, the medians and the ratios (issue 22's target:
batch produce at least 0.95x).

ROUNDS=4 by default; N=... and ONE=... set the messages; BENCH_QUICK=1: 2
rounds of 50,000 and 1,000.
"""

from __future__ import annotations

import json
import os
import sys
import time

from one_broker import alternated, medians

from duomq.client import Message, Producer
from duomq.testing.harness import LocalCluster

QUICK = os.environ.get("BENCH_QUICK") == "1"
ROUNDS = int(os.environ.get("ROUNDS", 2 if QUICK else 4))
N = int(os.environ.get("N", 50_000 if QUICK else 200_000))
ONE = int(os.environ.get("ONE", 1000 if QUICK else 3000))
BATCH = 256


def one(zk: str, base: str, i: int, idempotent: bool) -> dict:
    cluster = LocalCluster(zk, f"Idem{os.getpid()}x{i}", os.path.join(base, str(i)))
    cluster.add_broker("broker-a", 0, flush="ASYNC_FLUSH")
    try:
        cluster.create_topic("Idem", 4)
        batch = [Message("Idem", b"x" * 100)] * BATCH
        with Producer(zookeeper=zk, cluster=cluster.cluster, idempotent=idempotent) as p:
            for _ in range(20):                    # warm up
                p.send_batch(batch)
            t0 = time.perf_counter()
            for _ in range(N // BATCH):
                assert p.send_batch(batch).ok
            produce = (N // BATCH) * BATCH / (time.perf_counter() - t0)
            msg = Message("Idem", b"x" * 100)
            t0 = time.perf_counter()
            for _ in range(ONE):
                assert p.send(msg).ok
            single = ONE / (time.perf_counter() - t0)
    finally:
        cluster.stop_all()
    return {"idempotent": idempotent, "produce_batch256": round(produce),
            "one_outstanding": round(single)}


def main() -> int:
    rounds = alternated("idempotence-bench", ROUNDS, one)
    out: dict = {"bench": "idempotence_cost", "messages": N, "body_bytes": 100,
                 "brokers": "ASYNC_FLUSH master", "rounds": rounds,
                 **medians(rounds, "idempotent", ("produce_batch256", "one_outstanding"),
                           "idempotent_median", "plain_median")}
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
