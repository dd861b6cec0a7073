#!/usr/bin/env python3
"""Benchmark child processes (the producer and the consumer run as separate
processes, as in ../shared/peers). Each prints READY when set up (consumers)
and one ``RESULT {json}`` line at the end.

Bodies start with ``<u64 seq><u64 CLOCK_MONOTONIC ns>`` and are padded to size.
PRODUCER_SETTINGS (JSON of producer config fields) applies to every producer.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import threading
import time

from duomq.client import Message, Producer, PushConsumer

HDR = struct.Struct("<QQ")
# producer fields for every producing child, e.g. PRODUCER_SETTINGS='{"idempotent": false}'
PRODUCER = json.loads(os.environ.get("PRODUCER_SETTINGS", "{}"))


def emit(obj):
    sys.stdout.write("RESULT " + json.dumps(obj) + "\n")
    sys.stdout.flush()


def pct(sorted_vals, p):
    if not sorted_vals:
        return None
    k = min(len(sorted_vals) - 1, max(0, round(p / 100 * (len(sorted_vals) - 1))))
    return round(sorted_vals[k] / 1000, 1)


def summary(lat_ns):
    lat = sorted(lat_ns)
    return {"samples": len(lat), "p50_us": pct(lat, 50), "p99_us": pct(lat, 99),
            "p999_us": pct(lat, 99.9)}


def produce(a):
    pad = b"x" * (a.size - HDR.size)
    mono = time.monotonic_ns
    acks, errors, sent, statuses = [], 0, 0, {}
    with Producer("bench", zookeeper=a.zookeeper, cluster=a.cluster, **PRODUCER) as p:
        p.send(Message(a.topic, HDR.pack(0, mono()) + pad))  # routes warm
        t0 = time.perf_counter()
        deadline = t0 + a.max_s
        while sent < a.n and time.perf_counter() < deadline:
            k = min(a.batch, a.n - sent)
            msgs = [Message(a.topic, HDR.pack(sent + i, mono()) + pad) for i in range(k)]
            t = mono()
            try:
                r = p.send_batch(msgs) if k > 1 else p.send(msgs[0])
                statuses[r.status.value] = statuses.get(r.status.value, 0) + k
            except Exception:
                errors += 1
            if a.batch == 1:
                acks.append(mono() - t)
            sent += k
        el = time.perf_counter() - t0
        # the send's spin on its answer (busy_poll_us): how often it spun and caught
        spins, caught, _spent = p.remoting.busy_poll_counts()
    out = {"n": sent, "secs": el, "rate": sent / el, "errors": errors, "statuses": statuses,
           "spins": spins, "spins_caught": caught}
    if acks:
        out["ack"] = summary(acks)
    emit(out)


def latprod(a):
    pad = b"x" * (a.size - HDR.size)
    mono = time.monotonic_ns
    total = int(a.rate * a.secs)
    sent = errors = 0
    with Producer("bench-lat", zookeeper=a.zookeeper, cluster=a.cluster, **PRODUCER) as p:
        t0 = time.perf_counter()
        while sent < total and time.perf_counter() < t0 + a.secs + 30:
            now = time.perf_counter()
            due = min(total, int((now - t0) * a.rate) + 1) - sent
            if due <= 0:
                time.sleep(max(0.0, t0 + sent / a.rate - now))
                continue
            k = min(due, 256)
            msgs = [Message(a.topic, HDR.pack(sent + i, mono()) + pad) for i in range(k)]
            try:
                p.send_batch(msgs) if k > 1 else p.send(msgs[0])
            except Exception:
                errors += 1
            sent += k
        el = time.perf_counter() - t0
    emit({"n": sent, "secs": el, "rate": sent / el, "errors": errors})


def consume(a):
    mono = time.monotonic_ns
    st = {"n": 0, "t0": None, "last": None}
    lat = []
    warm = int(a.warmup_n)
    done = threading.Event()

    def on_message(m):
        now = time.perf_counter()
        if st["t0"] is None:
            st["t0"] = now
        st["n"] += 1
        st["last"] = now
        if a.latency:
            seq, ts = HDR.unpack_from(m.body)
            if seq >= warm:
                lat.append(mono() - ts)
        if st["n"] >= a.expect:
            done.set()

    c = PushConsumer(a.group, topic=a.topic, on_message=on_message, zookeeper=a.zookeeper, cluster=a.cluster,
                     consume_from=a.consume_from, pull_batch_size=a.pull_batch,
                     read_from=a.read_from, consume_threads=a.consume_threads)
    c.start()
    deadline = time.monotonic() + 20
    while len(c.held()) < a.queues and time.monotonic() < deadline:
        time.sleep(0.02)
    sys.stdout.write("READY\n")
    sys.stdout.flush()
    idle_deadline = None
    while not done.wait(0.1):
        last = st["last"]
        if last is not None and time.perf_counter() - last > a.idle_s:
            break
        if last is None:
            idle_deadline = idle_deadline or time.monotonic() + a.max_wait_s
            if time.monotonic() > idle_deadline:
                break
    c.shutdown()
    el = (st["last"] - st["t0"]) if st["t0"] else 0.0
    out = {"n": st["n"], "secs": el, "rate": st["n"] / el if el else 0.0,
           "reads_by_broker": {f"{g}/{b}": n for (g, b), n in c.reads_by_broker.items()}}
    if a.latency:
        out["lat"] = summary(lat)
    emit(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=["produce", "latprod", "consume"])
    ap.add_argument("--zookeeper", required=True)
    ap.add_argument("--cluster", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--max-s", type=float, default=30)
    ap.add_argument("--rate", type=float, default=2000)
    ap.add_argument("--secs", type=float, default=10)
    ap.add_argument("--group", default="bench-consumer")
    ap.add_argument("--expect", type=int, default=0)
    ap.add_argument("--latency", action="store_true")
    ap.add_argument("--warmup-n", type=int, default=0)
    ap.add_argument("--consume-from", default="first")
    ap.add_argument("--queues", type=int, default=1)
    ap.add_argument("--pull-batch", type=int, default=256)
    ap.add_argument("--idle-s", type=float, default=3)
    ap.add_argument("--max-wait-s", type=float, default=60)
    ap.add_argument("--read-from", default="master")
    ap.add_argument("--consume-threads", type=int, default=20)
    a = ap.parse_args()
    {"produce": produce, "latprod": latprod, "consume": consume}[a.role](a)


if __name__ == "__main__":
    main()
