#!/usr/bin/env python3
"""Many queues on one ASYNC_FLUSH master (100-byte messages): does the rate
hold when the queues multiply? One JSON line.

  produce   stop-and-wait batches of 100, each to the next queue in turn,
            over 8 queues (one topic) and over 10,000 queues (100 topics x
            100). Every queue is written once first (its consume-queue file
            made: reported as ``first_touch``); then N messages are timed.
  drain     a PushConsumer (concurrently, a no-op handler, a new group each
            time) drains a backlog of DRAIN_N messages spread evenly over 8
            queues and over 1,000 (one topic each), from the first message to
            the last; DRAIN_ROUNDS rounds, medians reported.
            Then over 8 queues again while a consumer holds pulls on the
            DRAIN_QUEUES drained queues (``few_with_held_pulls``).
  broker    the master's RSS and open files with all those queues.

BENCH_QUICK=1: fewer messages. N, DRAIN_N, TOPICS x PER_TOPIC (the many
queues), DRAIN_QUEUES set the sizes; CONSUME_THREADS the drains' pool.
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time

import psutil
from one_broker import one_broker

from duomq.client import Message, MessageQueue, Producer, PushConsumer
from duomq.coordinator import zk as zkutil
from duomq.coordinator.paths import ZkPaths
from duomq.coordinator.topics import TopicAdmin

QUICK = os.environ.get("BENCH_QUICK") == "1"
N = int(os.environ.get("N", 200_000 if QUICK else 1_000_000))
DRAIN_N = int(os.environ.get("DRAIN_N", 50_000 if QUICK else 100_000))
TOPICS = int(os.environ.get("TOPICS", 100))
PER_TOPIC = int(os.environ.get("PER_TOPIC", 100))
DRAIN_QUEUES = int(os.environ.get("DRAIN_QUEUES", 1000))
# consume-queue segments are preallocated: 300,000 entries (6 MB, RocketMQ's size) each
# would reserve 60 GB for 10,000 queues; 30,000 entries reserve 6 GB
CQ_ENTRIES = int(os.environ.get("CQ_ENTRIES", 30_000))
DRAIN_ROUNDS = int(os.environ.get("DRAIN_ROUNDS", 1 if QUICK else 3))
# the drains' consume thread pool (default: the consumer's, 20)
CONSUMER = {"consume_threads": int(os.environ["CONSUME_THREADS"])} \
    if os.environ.get("CONSUME_THREADS") else {}
FEW = 8
BATCH = 100
BODY = b"x" * 100


def create_topics(zk: str, cluster: str, topics: dict[str, int]) -> None:
    """Create ``topics`` (name -> queues) and wait for their routes."""
    client = zkutil.connect(zk, cluster=cluster)
    try:
        admin, paths = TopicAdmin(client, cluster), ZkPaths(cluster)
        for name, queues in topics.items():
            admin.create(name, queues)
        deadline = time.monotonic() + 120
        for name in topics:
            while not client.exists(paths.route(name, "broker-a")):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"route of {name} not published")
                time.sleep(0.02)
    finally:
        zkutil.close(client)


def produce(p: Producer, queues: list[MessageQueue], n: int) -> float:
    """Send ``n`` messages in batches of BATCH, each batch to the next queue; seconds taken."""
    batches = {t: [Message(t, BODY)] * BATCH for t in {mq.topic for mq in queues}}
    t0 = time.perf_counter()
    for i in range(n // BATCH):
        mq = queues[i % len(queues)]
        p.send_batch(batches[mq.topic], queue=mq)
    return time.perf_counter() - t0


def drain(zk: str, cluster: str, topic: str, n: int, round_: int) -> float:
    """Seconds a PushConsumer takes from the first of ``n`` messages to the last."""
    lock = threading.Lock()
    state = {"n": 0, "first": 0.0, "last": 0.0}
    done = threading.Event()

    def on_message(_msg):
        with lock:
            state["n"] += 1
            if state["n"] == 1:
                state["first"] = time.perf_counter()
            if state["n"] == n:
                state["last"] = time.perf_counter()
                done.set()

    c = PushConsumer(f"drain-{topic}-{round_}", topic=topic, on_message=on_message, zookeeper=zk,
                     cluster=cluster,
                     consume_from="first", **CONSUMER)
    c.start()
    finished = done.wait(300)
    c.shutdown()
    if not finished:
        raise RuntimeError(f"drain of {topic}: {state['n']} of {n} messages in 300 s")
    return state["last"] - state["first"]


def backlog(p: Producer, topic: str, queues: int, n: int) -> int:
    """``n`` messages spread evenly over the queues of ``topic``; how many were sent."""
    per = n // queues
    for q in range(queues):
        mq = MessageQueue(topic, "broker-a", q)
        for lo in range(0, per, BATCH):
            p.send_batch([Message(topic, BODY)] * min(BATCH, per - lo), queue=mq)
    return per * queues


def main() -> None:
    out: dict = {"bench": "many_queues", "body_bytes": len(BODY), "batch": BATCH,
                 "cq_entries_per_segment": CQ_ENTRIES}
    with one_broker("ManyQueues", "Few", FEW, flush="ASYNC_FLUSH", segment_size_bytes=256 << 20,
                    cq_entries_per_segment=CQ_ENTRIES) as (zk, cluster):
        master = next(p for p in psutil.process_iter(["cmdline"])
                      if cluster in " ".join(p.info["cmdline"] or []))
        many = [f"Many{t}" for t in range(TOPICS)]
        create_topics(zk, cluster, {**dict.fromkeys(many, PER_TOPIC), "DrainFew": FEW,
                                    "DrainMany": DRAIN_QUEUES})
        # the drains first: 10,000 queues just written keep the flush busy for seconds.
        # Each round drains both backlogs with a new group (alternating which goes
        # first); the medians are reported, the host being noisy
        with Producer(zookeeper=zk, cluster=cluster) as p:
            sizes = {"DrainFew": backlog(p, "DrainFew", FEW, DRAIN_N),
                     "DrainMany": backlog(p, "DrainMany", DRAIN_QUEUES, DRAIN_N)}
        rates: dict[str, list[float]] = {"DrainFew": [], "DrainMany": []}
        for r in range(DRAIN_ROUNDS):
            for topic in (("DrainFew", "DrainMany") if r % 2 == 0 else ("DrainMany", "DrainFew")):
                rates[topic].append(sizes[topic] / drain(zk, cluster, topic, sizes[topic], r))
        few_r, many_r = statistics.median(rates["DrainFew"]), statistics.median(rates["DrainMany"])
        out["drain"] = {"messages": DRAIN_N, "few_queues": FEW, "many_queues": DRAIN_QUEUES,
                        "rounds": DRAIN_ROUNDS, "few_msgs_per_s": round(few_r),
                        "many_msgs_per_s": round(many_r), "ratio": round(many_r / few_r, 3),
                        "many_rounds": [round(x) for x in rates["DrainMany"]],
                        "few_rounds": [round(x) for x in rates["DrainFew"]]}
        few_q = [MessageQueue("Few", "broker-a", q) for q in range(FEW)]
        many_q = [MessageQueue(t, "broker-a", q) for q in range(PER_TOPIC) for t in many]
        with Producer(zookeeper=zk, cluster=cluster) as p:
            produce(p, few_q, len(few_q) * BATCH)                 # routes and files made
            first = produce(p, many_q, len(many_q) * BATCH)
            rates = {}
            for name, qs in (("few", few_q), ("many", many_q), ("few_again", few_q)):
                rates[name] = N / produce(p, qs, N)
            # the same with a consumer's pulls held on DRAIN_QUEUES drained queues:
            # a send must not look at every held pull
            holder = PushConsumer("holder", topic="DrainMany", on_message=lambda _m: None, zookeeper=zk,
                                  cluster=cluster, consume_from="last").start()
            deadline = time.monotonic() + 60
            while len(holder.held()) < DRAIN_QUEUES and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.5)                                    # their pulls now held
            rates["few_held"] = N / produce(p, few_q, N)
            holder.shutdown()
        few = (rates["few"] + rates["few_again"]) / 2
        out["produce"] = {"messages": N, "few_queues": FEW, "many_queues": len(many_q),
                          "few_msgs_per_s": round(few), "many_msgs_per_s": round(rates["many"]),
                          "ratio": round(rates["many"] / few, 3),
                          "first_touch_msgs_per_s": round(len(many_q) * BATCH / first),
                          "few_with_held_pulls_msgs_per_s": round(rates["few_held"]),
                          "held_pulls": DRAIN_QUEUES}
        mem = master.memory_info().rss
        out["broker"] = {"queues": len(many_q) + 2 * FEW + DRAIN_QUEUES,
                         "rss_mib": round(mem / (1 << 20), 1),
                         "open_files": len(master.open_files()), "fds": master.num_fds(),
                         "maps": len(master.memory_maps(grouped=False))}
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
