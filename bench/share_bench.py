#!/usr/bin/env python3
"""Share consumption (issue 44), one JSON line:

  one_queue    a one-queue topic with a backlog, consumed for SECS seconds by
               1, 4 and 16 SimpleConsumers of one share group (threads of
               one process), each with a 1 ms handler per message, acking
               each received batch: messages acked per second, and the ratio
               to one consumer (cluster mode can never use more than one
               consumer on one queue)
  backlog      N messages on 8 queues drained by 4 SimpleConsumers of a
               share group (no handler), and by a cluster-mode PushConsumer
               of a new group: messages per second of each

A lone ASYNC_FLUSH master, 100-byte bodies. BENCH_QUICK=1: shorter runs.
"""

from __future__ import annotations

import json
import os
import threading
import time

from one_broker import one_broker, send_all

from duomq.client import Message, PushConsumer, SimpleConsumer

QUICK = os.environ.get("BENCH_QUICK") == "1"
SECS = float(os.environ.get("SECS", 3 if QUICK else 8))
N = int(os.environ.get("N", 50_000 if QUICK else 200_000))
HANDLER_S = 0.001
BODY = b"x" * 100


def consume_for(zk: str, cluster: str, topic: str, group: str, consumers: int, secs: float,
                handler_s: float, batch: int = 8) -> dict:
    """Messages acked by ``consumers`` SimpleConsumers in ``secs``."""
    acked = [0] * consumers
    redelivered = [0] * consumers
    stop = threading.Event()
    clients = [SimpleConsumer(group, subscriptions=topic, zookeeper=zk, cluster=cluster,
                              consume_from="first") for _ in range(consumers)]

    def run(i: int) -> None:
        c = clients[i]
        while not stop.is_set():
            ms = c.receive(batch, wait_ms=100)
            for m in ms:
                if handler_s:
                    time.sleep(handler_s)
                redelivered[i] += m.delivery_count > 1
            if ms:
                c.ack(ms)
                acked[i] += len(ms)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(consumers)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    time.sleep(secs)
    stop.set()
    for t in threads:
        t.join(30)
    took = time.monotonic() - t0
    for c in clients:
        c.close()
    return {"consumers": consumers, "acked": sum(acked), "per_s": round(sum(acked) / took, 1),
            "redelivered": sum(redelivered),
            "busiest_share": round(max(acked) / max(1, sum(acked)), 3)}


def drain_share(zk: str, cluster: str, topic: str, n: int, consumers: int = 4) -> float:
    """Seconds 4 SimpleConsumers take to ack ``n`` messages."""
    done = [0]
    lock = threading.Lock()
    clients = [SimpleConsumer("drainers", subscriptions=topic, zookeeper=zk, cluster=cluster,
                              consume_from="first") for _ in range(consumers)]

    def run(c: SimpleConsumer) -> None:
        while done[0] < n:
            ms = c.receive(256, wait_ms=200)
            if ms:
                c.ack(ms)
                with lock:
                    done[0] += len(ms)

    t0 = time.monotonic()
    threads = [threading.Thread(target=run, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    took = time.monotonic() - t0
    for c in clients:
        c.close()
    return took


def drain_push(zk: str, cluster: str, topic: str, n: int) -> float:
    got = [0]
    done = threading.Event()
    lock = threading.Lock()

    def on_message(_m) -> None:
        with lock:
            got[0] += 1
            if got[0] >= n:
                done.set()

    c = PushConsumer("pushers", topic=topic, on_message=on_message, zookeeper=zk, cluster=cluster,
                     consume_from="first")
    t0 = time.monotonic()
    c.start()
    done.wait(600)
    took = time.monotonic() - t0
    c.shutdown()
    return took


def main() -> None:
    out: dict = {"bench": "share", "handler_ms": HANDLER_S * 1000, "secs": SECS}
    with one_broker("Share", "OneQueue", 1, flush="ASYNC_FLUSH") as (zk, cluster):
        need = int(20_000 * SECS)            # more than 16 consumers ack in SECS
        send_all(zk, cluster, [Message("OneQueue", BODY) for _ in range(need)])
        runs = [consume_for(zk, cluster, "OneQueue", f"g{k}", k, SECS, HANDLER_S)
                for k in (1, 4, 16)]
        base = runs[0]["per_s"]
        for r in runs:
            r["ratio"] = round(r["per_s"] / base, 2) if base else None
        out["one_queue"] = runs
    with one_broker("Share", "Backlog", 8, flush="ASYNC_FLUSH") as (zk, cluster):
        send_all(zk, cluster, [Message("Backlog", BODY) for _ in range(N)])
        share_s = drain_share(zk, cluster, "Backlog", N)
        push_s = drain_push(zk, cluster, "Backlog", N)
        out["backlog"] = {"messages": N, "queues": 8,
                          "share_4_consumers_per_s": round(N / share_s, 1),
                          "push_consumer_per_s": round(N / push_s, 1),
                          "ratio": round(push_s / share_s, 3)}
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
