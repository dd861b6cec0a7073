#!/usr/bin/env python3
"""Timer messages (issue 70), one JSON line. A lone master with the default
settings, 100-byte bodies:

  send         timer sends against plain sends of the same messages, in
               batches of 256 and one at a time (one outstanding), rounds
               alternated in one sitting: messages per second, medians and
               the ratio (timer / plain); and batches of plain messages
               with one property each (a timer's delivery time is one);
               "made": batches of 256 of messages made before the clock
               starts (the send path alone, without the caller's
               Message(...) of each, which "batch" counts)
  fire         RATE timers a second coming due over FIRE_S seconds (sent
               ahead): the lag from each one's delivery time to its arrival
               at a PushConsumer (consume_threads = 0), p50 / p99 / max, the
               broker's own fire lag histogram, and how many came early
  pending      the broker's memory (RSS, and of it anonymous and file pages)
               with each count of PENDING timers pending
               (due 1 to 6 days ahead), and its start-up after a kill -9
               with the largest count pending: the seconds to serving again
               and to its first timer fired, and the timer records the
               restart read again (none is read but those past the last
               checkpoint)

BENCH_QUICK=1: 20,000 timers/s at most 5 s, 100,000 and 1,000,000 pending;
PENDING=1000000,10000000 for the figures of the issue.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import statistics
import tempfile
import threading
import time

from duomq.client import Message, Producer, PushConsumer
from duomq.dev.zookeeper import launch
from duomq.testing.harness import LocalCluster, member_node, wait_for

QUICK = os.environ.get("BENCH_QUICK") == "1"
ROUNDS = int(os.environ.get("ROUNDS", 2 if QUICK else 3))
SEND_N = int(os.environ.get("SEND_N", 20_000 if QUICK else 60_000))
ONE_N = int(os.environ.get("ONE_N", 2_000 if QUICK else 5_000))
RATE = int(os.environ.get("RATE", 10_000))
FIRE_S = float(os.environ.get("FIRE_S", 5 if QUICK else 10))
PENDING = [int(x) for x in os.environ.get(
    "PENDING", "100000,1000000" if QUICK else "1000000,10000000").split(",")]
BODY = b"x" * 100
DAY_MS = 86_400_000


@contextlib.contextmanager
def broker(name: str):
    base = tempfile.mkdtemp(prefix=f"duomq-{name.lower()}-", dir=os.environ.get("BENCH_DIR"))
    zk = launch(data_dir=os.path.join(base, "zk"))
    cluster = LocalCluster(zk.connect, f"{name}{os.getpid()}", os.path.join(base, "brokers"))
    try:
        b = cluster.add_broker("broker-a", 0)
        for topic in ("Plain", "Timed"):
            cluster.create_topic(topic, 8)
        yield zk.connect, cluster.cluster, b
    finally:
        cluster.stop_all()
        zk.stop()
        shutil.rmtree(base, ignore_errors=True)


def rate_of(p: Producer, topic: str, n: int, timer: bool, batch: int,
            prop: bool = False, made: bool = False) -> float:
    def msg():
        if prop:                                     # a plain message with one property
            return Message(topic, BODY, properties={"ORDER": "x"})
        return Message(topic, BODY, delay_ms=3 * DAY_MS if timer else 0)
    if made:                                         # the send path alone: made before
        batches = [[msg() for _ in range(batch)] for _ in range(0, n, batch)]
        t0 = time.perf_counter()
        for b in batches:
            p.send_batch(b)
        return n / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    if batch == 1:
        for _ in range(n):
            p.send(msg())
    else:
        for _ in range(0, n, batch):
            p.send_batch([msg() for _ in range(batch)])
    return n / (time.perf_counter() - t0)


def send_figures(zk: str, cl: str) -> dict:
    got: dict[tuple[str, bool], list[float]] = {}
    with Producer(zookeeper=zk, cluster=cl) as p:
        rate_of(p, "Plain", 2_000, False, 256)          # warm up both paths
        rate_of(p, "Timed", 2_000, True, 256)
        for r in range(ROUNDS):
            for timer in ((True, False) if r % 2 == 0 else (False, True)):
                topic = "Timed" if timer else "Plain"
                got.setdefault(("batch", timer), []).append(rate_of(p, topic, SEND_N, timer, 256))
                got.setdefault(("one", timer), []).append(rate_of(p, topic, ONE_N, timer, 1))
                got.setdefault(("made", timer), []).append(
                    rate_of(p, topic, SEND_N, timer, 256, made=True))
                if not timer:
                    got.setdefault(("batch", "prop"), []).append(
                        rate_of(p, topic, SEND_N, False, 256, prop=True))
    out = {}
    for kind in ("batch", "made", "one"):
        t, plain = statistics.median(got[(kind, True)]), statistics.median(got[(kind, False)])
        out[kind] = {"timer_per_s": round(t), "plain_per_s": round(plain),
                     "ratio": round(t / plain, 3)}
    prop = statistics.median(got[("batch", "prop")])
    out["batch"].update(plain_one_property_per_s=round(prop),
                        ratio_to_one_property=round(out["batch"]["timer_per_s"] / prop, 3))
    return out


def fire_figures(zk: str, cl: str) -> dict:
    n = int(RATE * FIRE_S)
    arrivals: dict[bytes, float] = {}
    lock = threading.Lock()

    def on_message(m) -> None:
        t = time.time()
        with lock:
            arrivals.setdefault(m.body, t)

    c = PushConsumer("fire-bench", topic="Timed", on_message=on_message, zookeeper=zk,
                     cluster=cl, consume_from="last", consume_threads=0).start()
    time.sleep(2)                                     # the consumer assigned its queues
    start = time.time() + 2 + n / 40_000              # after they are all sent
    due = {b"%08d" % i: start + i / RATE for i in range(n)}
    items = list(due.items())
    with Producer(zookeeper=zk, cluster=cl) as p:
        for lo in range(0, n, 256):
            p.send_batch([Message("Timed", b, deliver_at_ms=int(at * 1000) + 1)
                          for b, at in items[lo:lo + 256]])
    sent_by = time.time()
    try:
        wait_for(lambda: len(arrivals) >= n, timeout_s=FIRE_S + 120, what="every timer")
    finally:
        c.shutdown()
    lags = sorted(arrivals[b] - (int(at * 1000) + 1) / 1000 for b, at in items)
    url = member_node(zk, cl, "broker-a", 0).metrics
    hist = broker_fire_lag(url)
    return {"timers": n, "per_s": RATE, "over_s": FIRE_S,
            "sent_before_first_due_s": round(start - sent_by, 2),
            "lag_ms": {"p50": round(lags[len(lags) // 2] * 1000, 1),
                       "p99": round(lags[int(len(lags) * 0.99)] * 1000, 1),
                       "max": round(lags[-1] * 1000, 1)},
            "early": sum(1 for x in lags if x < -0.002),
            "broker_fire_lag": hist}


def broker_fire_lag(url: str) -> dict:
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    buckets = {}
    for f in text_string_to_metric_families(text):
        if f.name == "duomq_timer_fire_lag_seconds":
            for s in f.samples:
                if s.name.endswith("_bucket"):
                    buckets[s.labels["le"]] = s.value
    total = buckets.get("+Inf", 0) or 1
    return {f"within_{le}_s": round(v / total, 4) for le, v in buckets.items()
            if le in ("0.01", "0.025", "0.05", "0.1", "1.0")}


def fill(zk: str, cl: str, n: int, done: int) -> float:
    """Timers from ``done`` to ``n`` pending (1 to 6 days ahead); seconds taken."""
    now = int(time.time() * 1000)
    t0 = time.monotonic()
    with Producer(zookeeper=zk, cluster=cl) as p:
        for lo in range(done, n, 512):
            p.send_batch([Message("Timed", BODY, deliver_at_ms=now + DAY_MS + (i * 7919) %
                                  (5 * DAY_MS)) for i in range(lo, min(n, lo + 512))])
    return time.monotonic() - t0


def memory_mib(pid: int) -> dict:
    """RSS, and of it the anonymous memory (the process's own) and the file
    pages it maps (the commit log's and the indexes': page cache, reclaimable)."""
    with open(f"/proc/{pid}/status") as f:
        kb = {k: int(v.split()[0]) for k, _, v in (line.partition(":") for line in f)
              if k in ("VmRSS", "RssAnon", "RssFile")}
    return {"rss": round(kb["VmRSS"] / 1024, 1), "anon": round(kb["RssAnon"] / 1024, 1),
            "file": round(kb["RssFile"] / 1024, 1)}


def pending_figures(zk: str, cl: str, b) -> dict:
    out: dict = {"memory_mib": {}, "fill_per_s": {}}
    done = 0
    for n in PENDING:
        took = fill(zk, cl, n, done)
        out["fill_per_s"][str(n)] = round((n - done) / took)
        done = n
        time.sleep(6)             # indexed and checkpointed (every 1 s), offsets persisted (5 s)
        out["memory_mib"][str(n)] = memory_mib(b.pid)
    mark = os.path.getsize(b.log_path)
    b.kill()
    t0 = time.monotonic()
    b.start()                                          # returns once registered
    serving = time.monotonic() - t0
    soon = int(time.time() * 1000) + 200
    arrived = threading.Event()
    c = PushConsumer("startup", topic="Timed", on_message=lambda m: m.body == b"first" and
                     arrived.set(), zookeeper=zk, cluster=cl, consume_from="last",
                     consume_threads=0).start()
    with Producer(zookeeper=zk, cluster=cl) as p:
        p.send(Message("Timed", b"first", deliver_at_ms=soon))
    arrived.wait(120)
    first_fired = time.monotonic() - t0
    c.shutdown()
    with open(b.log_path) as f:
        f.seek(mark)
        text = f.read()
    resumed = re.findall(r"timers resume at \d+ with the timer topic read again from "
                         r"(\d+) to (\d+)", text)
    low, high = map(int, resumed[-1]) if resumed else (0, 0)
    opened = re.findall(r"timer index opened: (\d+) timer records indexed", text)
    out["restart"] = {"pending": done, "serving_s": round(serving, 2),
                      "first_timer_fired_s": round(first_fired, 2) if arrived.is_set() else None,
                      "indexed_at_checkpoint": int(opened[-1]) if opened else None,
                      "read_again": high - low, "memory_mib_after": memory_mib(b.pid)}
    return out


def main() -> None:
    out: dict = {"bench": "timer", "quick": QUICK}
    with broker("TimerSend") as (zk, cl, _b):
        out["send"] = send_figures(zk, cl)
    with broker("TimerFire") as (zk, cl, _b):
        out["fire"] = fire_figures(zk, cl)
    with broker("TimerPending") as (zk, cl, b):
        out["pending"] = pending_figures(zk, cl, b)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
