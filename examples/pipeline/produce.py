"""Producers of shop events: ``python -m pipeline.produce`` (from examples/)
or ``send(...)`` from code. Events go out in batches of ``batch`` through
the producer's batching, spread over the topic's queues; a batch that is not
stored as SEND_OK stops the run with its status."""

from __future__ import annotations

import argparse
import json
import time

from duomq.client import Message, Producer

from . import add_cluster_options
from .events import MINUTE_MS, Event, generate


def send(zookeeper: str, cluster: str, topic: str, events: list[Event], batch: int = 256) -> dict:
    t0 = time.perf_counter()
    with Producer(zookeeper=zookeeper, cluster=cluster) as producer:
        for i in range(0, len(events), batch):
            msgs = [Message(topic, e.encode(), tags=e.type, keys=e.user)
                    for e in events[i:i + batch]]
            result = producer.send_batch(msgs)
            if not result.ok:
                raise RuntimeError(f"batch at event {i} was not stored: {result.status.value}")
    took = time.perf_counter() - t0
    return {"sent": len(events), "seconds": round(took, 3),
            "events_per_s": round(len(events) / took) if took else None}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    add_cluster_options(ap)
    ap.add_argument("--start", type=int, default=None,
                    help="event time of the first minute, ms (default: --minutes before this minute)")
    ap.add_argument("--minutes", type=int, default=30)
    ap.add_argument("--per-minute", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args(argv)
    start = a.start if a.start is not None else \
        (int(time.time() * 1000) // MINUTE_MS - a.minutes) * MINUTE_MS
    events = generate(start, a.minutes, a.per_minute, a.seed)
    print(json.dumps(send(a.zookeeper, a.cluster, a.topic, events)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
