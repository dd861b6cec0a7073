#!/usr/bin/env python3
"""Re-deliveries when a consumer group changes: a backlog of N messages
(default 100,000 x 100 B on 8 queues, one ASYNC_FLUSH master) drained by a
group while a second member joins (once a quarter is consumed), while one of
two members leaves cleanly, and while one of two (a ``duomq consume``
process) is killed with kill -9. One JSON line: per case, deliveries, unique
messages, duplicates, and the time each moved queue was unowned (the old
owner stopped pulling it until the new owner took it); for the kill, what
the dead member had consumed past its last commit (the most it may
re-deliver) and re-deliveries beyond that (must be 0).

BENCH_QUICK=1: 30,000 messages. N=... sets the backlog.
"""

from __future__ import annotations

import json
import os

from one_broker import one_broker, send_all

from duomq.client import Message
from duomq.testing import handoff

QUICK = os.environ.get("BENCH_QUICK") == "1"
N = int(os.environ.get("N", 30_000 if QUICK else 100_000))
QUEUES = 8


def main() -> None:
    out: dict = {"bench": "handoff", "messages": N, "queues": QUEUES}
    with one_broker("HandoffBench", "Events", QUEUES, flush="ASYNC_FLUSH",
                    segment_size_bytes=256 << 20) as (zk, cluster):
        send_all(zk, cluster, [Message("Events", b"x" * 100)] * N)
        for case in os.environ.get("CASES", "join,leave,kill").split(","):
            out[case] = getattr(handoff, case)(zk, cluster, "Events", N)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
