"""``duomq produce TOPIC [BODY ...]``: bodies from arguments or stdin lines,
or ``--count N --size BYTES`` for load."""

from __future__ import annotations

import collections
import os
import sys
import time

from duomq.cli.common import add_endpoint, add_json, add_metrics_port, emit, endpoint, say_metrics
from duomq.client import Message, Producer
from duomq.client.producer import BATCH_MAX_BYTES


def add(sub) -> None:
    p = sub.add_parser("produce", help="send messages")
    p.add_argument("topic")
    p.add_argument("bodies", nargs="*", help="message bodies (default: stdin lines)")
    p.add_argument("--count", type=int, help="send N generated messages")
    p.add_argument("--size", type=int, default=100, help="generated body size in bytes (100)")
    p.add_argument("--batch", type=int, default=256, help="messages per request (256; 1 = one by one)")
    p.add_argument("--tags", default="")
    p.add_argument("--keys", default="")
    p.add_argument("--group", default="CLI_PRODUCER", help="producer group")
    add_metrics_port(p)
    add_endpoint(p)
    add_json(p)
    p.set_defaults(func=run)


def _bodies(args):
    if args.count is not None:
        pad = os.urandom(max(0, args.size - 12)).hex()[:max(0, args.size - 12)].encode()
        for i in range(args.count):
            yield b"%012d" % i + pad
    elif args.bodies:
        for b in args.bodies:
            yield b.encode()
    else:
        for line in sys.stdin.buffer:
            yield line.rstrip(b"\n")


def run(args) -> int:
    zookeeper, cluster = endpoint(args)
    counts: collections.Counter[str] = collections.Counter()
    errors: collections.Counter[str] = collections.Counter()
    t0 = time.perf_counter()
    with Producer(zookeeper, cluster, group=args.group, metrics_port=args.metrics_port) as producer:
        say_metrics(producer)
        batch: list[Message] = []

        def flush():
            if not batch:
                return
            try:
                r = producer.send_batch(batch)
                counts[r.status.value] += len(batch)
            except Exception as exc:
                errors[type(exc).__name__] += len(batch)
                print(f"error: {exc}", file=sys.stderr)
            batch.clear()

        size = 0
        for body in _bodies(args):
            batch.append(Message(args.topic, body, tags=args.tags, keys=args.keys))
            size += len(body)
            if len(batch) >= max(1, args.batch) or size >= BATCH_MAX_BYTES:
                flush()
                size = 0
        flush()
    secs = time.perf_counter() - t0
    total = sum(counts.values()) + sum(errors.values())
    summary = {"topic": args.topic, "sent": total, "statuses": dict(counts),
               "errors": dict(errors), "seconds": round(secs, 3),
               "msgs_per_s": round(total / secs, 1) if secs else None}
    if args.json:
        emit(summary)
    else:
        print(f"sent {total} messages to {args.topic} in {secs:.2f} s: "
              + ", ".join(f"{k} {v}" for k, v in {**counts, **errors}.items()))
    return 0 if not errors and set(counts) <= {"SEND_OK"} else 1
