#!/usr/bin/env python3
"""Push consumer throughput: a backlog of N messages (default 500,000 x 100 B
on 8 queues, ASYNC_FLUSH master) drained by a PushConsumer with a no-op
handler, once per consume mode (concurrently on a pool of 20 threads, and
orderly: one thread at a time per queue, queues locked on the master). One
JSON line: per mode, messages per second from the first message to the last,
and the offsets committed afterwards (they must reach the end of each queue).

BENCH_QUICK=1: 200,000 messages. N=... sets the backlog. CLIENT_METRICS=1:
the consumer serves its Prometheus metrics (metrics_port=0), to see their cost.
"""

from __future__ import annotations

import json
import os
import threading
import time

from one_broker import one_broker, send_all

from duomq.client import Message, PullConsumer, PushConsumer

QUICK = os.environ.get("BENCH_QUICK") == "1"
N = int(os.environ.get("N", 200_000 if QUICK else 500_000))
QUEUES = 8
BODY = b"x" * 100
METRICS = {"metrics_port": 0} if os.environ.get("CLIENT_METRICS") == "1" else {}


def drain(zk: str, cluster: str, mode: str) -> dict:
    lock = threading.Lock()
    state = {"n": 0, "first": None, "last": None}
    done = threading.Event()

    def on_message(msg):             # no-op but for counting, as a user's handler would
        with lock:
            state["n"] += 1
            if state["n"] == 1:
                state["first"] = time.perf_counter()
            if state["n"] == N:
                state["last"] = time.perf_counter()
                done.set()

    group = f"bench-{mode}"
    c = PushConsumer(group, topic="Backlog", on_message=on_message, zookeeper=zk, cluster=cluster,
                     consume_from="first", consume_mode=mode, **METRICS)
    c.start()
    finished = done.wait(300)
    c.shutdown()
    with PullConsumer(group, zookeeper=zk, cluster=cluster) as pc:
        committed = sum(pc.committed(q) for q in pc.queues("Backlog"))
    seconds = state["last"] - state["first"] if finished else float("nan")
    return {"messages": state["n"], "seconds": round(seconds, 3),
            "messages_per_s": round(N / seconds) if finished else 0, "committed": committed}


def main() -> None:
    with one_broker("PushBench", "Backlog", QUEUES, flush="ASYNC_FLUSH",
                    segment_size_bytes=256 << 20) as (zk, cluster):
        produce_s = send_all(zk, cluster, [Message("Backlog", BODY)] * N)
        out = {"bench": "push_consumer", "backlog": N, "queues": QUEUES,
               "body_bytes": len(BODY), "produce_messages_per_s": round(N / produce_s),
               "client_metrics": bool(METRICS)}
        for mode in os.environ.get("MODES", "concurrently,orderly").split(","):
            out[mode] = drain(zk, cluster, mode)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
