#!/usr/bin/env python3
"""The cost and speed of the key index: N messages (default 500,000 x 100 B
on 4 queues, ASYNC_FLUSH master) produced in batches of 512 without keys and
then, on a fresh broker, each with a key of its own; then lookups by key of
random messages (each answer checked: exactly that message). One JSON line:
both produce rates, the ratio, and the lookup latencies (p50, p99, max).

BENCH_QUICK=1: 100,000 messages, 300 lookups. N=..., LOOKUPS=... set them.
"""

from __future__ import annotations

import json
import os
import random
import time

from one_broker import one_broker, send_all

from duomq.client import Message, PullConsumer

QUICK = os.environ.get("BENCH_QUICK") == "1"
N = int(os.environ.get("N", 100_000 if QUICK else 500_000))
LOOKUPS = int(os.environ.get("LOOKUPS", 300 if QUICK else 2000))
QUEUES = 4
BODY = b"x" * 100
BATCH = 512


def produce(zk: str, cluster: str, keyed: bool) -> float:
    return send_all(zk, cluster, [Message("Orders", BODY, keys=f"order-{i}" if keyed else "")
                                  for i in range(N)], BATCH)


def lookups(zk: str, cluster: str) -> list[float]:
    rng = random.Random(7)
    out = []
    with PullConsumer("bench-lookups", zookeeper=zk, cluster=cluster) as c:
        c.queues("Orders")
        for _ in range(LOOKUPS):
            i = rng.randrange(N)
            t0 = time.perf_counter()
            found = c.query_by_key("Orders", f"order-{i}")
            out.append(time.perf_counter() - t0)
            assert [m.keys for m in found] == [f"order-{i}"], (i, found)
    return sorted(out)


def pct(xs: list[float], p: float) -> float:
    return round(xs[min(len(xs) - 1, int(p * len(xs)))] * 1000, 3)


def main() -> None:
    with one_broker("KeyBenchPlain", "Orders", QUEUES, flush="ASYNC_FLUSH") as (zk, cluster):
        plain_s = produce(zk, cluster, keyed=False)
    with one_broker("KeyBench", "Orders", QUEUES, flush="ASYNC_FLUSH") as (zk, cluster):
        keyed_s = produce(zk, cluster, keyed=True)
        lat = lookups(zk, cluster)
    print(json.dumps({
        "bench": "key_index", "messages": N, "body_bytes": len(BODY), "batch": BATCH,
        "produce_plain_messages_per_s": round(N / plain_s),
        "produce_keyed_messages_per_s": round(N / keyed_s),
        "keyed_vs_plain": round(plain_s / keyed_s, 3),
        "lookups": LOOKUPS, "lookup_ms_p50": pct(lat, 0.5), "lookup_ms_p99": pct(lat, 0.99),
        "lookup_ms_max": round(lat[-1] * 1000, 3),
    }), flush=True)


if __name__ == "__main__":
    main()
