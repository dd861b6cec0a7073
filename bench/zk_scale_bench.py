#!/usr/bin/env python3
"""Routes and consumer-group membership at scale on one real ZooKeeper: one
ASYNC_FLUSH master hosting TOPICS topics (default 1,000, 4 queues each) and
GROUPS consumer groups (default 200), each a PushConsumer on its own topic,
spread over WORKERS processes. One JSON line:

  routes      seconds from creating the topics to every route published by
              the master
  settle      seconds for all GROUPS groups to hold all their queues
  join/leave  for SAMPLES groups in turn: a second member joins (then leaves)
              and the time from its start (its shutdown) until the group's
              owner nodes in ZooKeeper show the new assignment (allocated
              averagely over the members), median and max; the same measured
              first on the cluster before the topics and groups exist
  broker      the master's RSS and open files at the end

BENCH_QUICK=1: 200 topics, 40 groups, 5 samples.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import statistics
import time

import psutil
from many_queues_bench import create_topics
from one_broker import one_broker

from duomq.client import MessageQueue, PushConsumer
from duomq.client.cluster.queue_owners import node_name
from duomq.client.consumer.allocate import allocate_averagely
from duomq.coordinator import zk as zkutil
from duomq.coordinator.paths import ZkPaths

QUICK = os.environ.get("BENCH_QUICK") == "1"
TOPICS = int(os.environ.get("TOPICS", 200 if QUICK else 1000))
GROUPS = int(os.environ.get("GROUPS", 40 if QUICK else 200))
WORKERS = int(os.environ.get("WORKERS", 4))
SAMPLES = int(os.environ.get("SAMPLES", 5 if QUICK else 10))
QUEUES = 4
SMALL = {"consume_threads": 1}          # a member that reads little: 200 fit in a few processes


def topic_of(g: int) -> str:
    return f"Scale{g % TOPICS}"


def group_of(g: int) -> str:
    return f"scale-group-{g}"


def worker(zk: str, cluster: str, groups: list[int], ready, stop) -> None:
    """Start one member of each of ``groups``; hold them until ``stop``."""
    members = [PushConsumer(group_of(g), topic=topic_of(g), on_message=lambda _m: None, zookeeper=zk,
                            cluster=cluster, **SMALL).start() for g in groups]
    ready.set()
    stop.wait()
    for c in members:
        c.shutdown()


class Owners:
    """The owner nodes and members of a group, read from ZooKeeper."""

    def __init__(self, zk: str, cluster: str):
        self.client = zkutil.connect(zk, cluster=cluster)
        self.paths = ZkPaths(cluster)

    def settled(self, group: str, topic: str) -> bool:
        """Every queue of ``topic`` held by the member the averaging allocation gives it."""
        try:
            members = sorted(self.client.get_children(self.paths.group_members(group)))
        except Exception:
            return False
        queues = [MessageQueue(topic, "broker-a", q) for q in range(QUEUES)]
        root = self.paths.group_owners(group)
        for m in members:
            for mq in allocate_averagely(queues, members, m):
                try:
                    owner = self.client.get(f"{root}/{node_name(mq)}")[0].decode()
                except Exception:
                    return False
                if owner != m:
                    return False
        return bool(members)

    def wait(self, group: str, topic: str, timeout_s: float = 120) -> float:
        t0 = time.perf_counter()
        while not self.settled(group, topic):
            if time.perf_counter() - t0 > timeout_s:
                raise TimeoutError(f"group {group} did not settle in {timeout_s} s")
            time.sleep(0.005)
        return time.perf_counter() - t0

    def close(self) -> None:
        zkutil.close(self.client)


def changes(zk: str, cluster: str, owners: Owners, groups: list[int]) -> dict:
    """A second member joins each of ``groups`` and leaves again: seconds to settle."""
    join, leave = [], []
    for g in groups:
        group, topic = group_of(g), topic_of(g)
        t0 = time.perf_counter()
        c = PushConsumer(group, topic=topic, on_message=lambda _m: None, zookeeper=zk, cluster=cluster,
                         **SMALL).start()
        owners.wait(group, topic)
        join.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        c.shutdown()
        owners.wait(group, topic)
        leave.append(time.perf_counter() - t0)
    return {"join_median_s": round(statistics.median(join), 3), "join_max_s": round(max(join), 3),
            "leave_median_s": round(statistics.median(leave), 3),
            "leave_max_s": round(max(leave), 3)}


def main() -> None:
    out: dict = {"bench": "zk_scale", "topics": TOPICS, "queues_per_topic": QUEUES,
                 "groups": GROUPS, "workers": WORKERS, "samples": SAMPLES}
    with one_broker("ZkScale", "Scale0", QUEUES, flush="ASYNC_FLUSH") as (zk, cluster):
        master = next(p for p in psutil.process_iter(["cmdline"])
                      if cluster in " ".join(p.info["cmdline"] or []))
        owners = Owners(zk, cluster)
        ctx = multiprocessing.get_context("spawn")
        stop = ctx.Event()
        procs = []
        try:
            # the same membership changes on a cluster of one topic and one group
            p0 = ctx.Process(target=worker, args=(zk, cluster, [0], ready := ctx.Event(), stop))
            p0.start()
            procs.append(p0)
            ready.wait(120)
            owners.wait(group_of(0), topic_of(0))
            out["small_cluster"] = changes(zk, cluster, owners, [0] * SAMPLES)
            t0 = time.perf_counter()
            create_topics(zk, cluster, {topic_of(t): QUEUES for t in range(1, TOPICS)})
            out["routes_s"] = round(time.perf_counter() - t0, 2)
            t0 = time.perf_counter()
            readies = []
            for w in range(WORKERS):
                groups = [g for g in range(1, GROUPS) if g % WORKERS == w]
                readies.append(ctx.Event())
                p = ctx.Process(target=worker, args=(zk, cluster, groups, readies[-1], stop))
                p.start()
                procs.append(p)
            for r in readies:
                r.wait(600)
            for g in range(GROUPS):
                owners.wait(group_of(g), topic_of(g))
            out["settle_s"] = round(time.perf_counter() - t0, 2)
            step = max(1, GROUPS // SAMPLES)
            out["at_scale"] = changes(zk, cluster, owners, list(range(0, GROUPS, step))[:SAMPLES])
            out["broker"] = {"rss_mib": round(master.memory_info().rss / (1 << 20), 1),
                             "open_files": len(master.open_files()),
                             "threads": master.num_threads()}
        finally:
            stop.set()
            for p in procs:
                p.join(120)
                if p.is_alive():
                    p.kill()
            owners.close()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
