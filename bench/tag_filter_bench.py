#!/usr/bin/env python3
"""The cost of tag filtering: a backlog of N messages (default 1,000,000 x
100 B on 4 queues, ASYNC_FLUSH master) where 1% carry the tag `Hit`, read
to the end by a PullConsumer with subscription `Hit` and with `*`. One JSON
line: the time and rate of each drain, the entries the filtered drain passed
over per second, and the commit-log bytes each read.

BENCH_QUICK=1: 200,000 messages. N=... sets the backlog.
"""

from __future__ import annotations

import json
import os
import time

from one_broker import one_broker, send_all

from duomq.client import Message, PullConsumer, PullStatus

QUICK = os.environ.get("BENCH_QUICK") == "1"
N = int(os.environ.get("N", 200_000 if QUICK else 1_000_000))
QUEUES = 4
BODY = b"x" * 100


def drain(zk: str, cluster: str, subscription: str) -> dict:
    with PullConsumer(f"bench-{subscription.strip('*') or 'all'}", zookeeper=zk, cluster=cluster) as c:
        t0 = time.monotonic()
        got = pulls = body_bytes = 0
        for q in c.queues("Backlog"):
            off = 0
            while True:
                r = c.pull(q, off, max_messages=1024, subscription=subscription)
                pulls += 1
                if r.status is PullStatus.NO_NEW_MESSAGE:
                    break
                got += len(r.messages)
                body_bytes += sum(len(m.body) for m in r.messages)
                off = r.next_offset
        seconds = time.monotonic() - t0
    return {"subscription": subscription, "messages": got, "pulls": pulls,
            "seconds": round(seconds, 3), "messages_per_s": round(got / seconds),
            "entries_passed_per_s": round(N / seconds), "body_bytes": body_bytes}


def main() -> None:
    with one_broker("TagBench", "Backlog", QUEUES, flush="ASYNC_FLUSH") as (zk, cluster):
        hundred = [Message("Backlog", BODY, tags="Hit" if i == 0 else "Miss") for i in range(100)]
        produce_s = send_all(zk, cluster, (hundred * -(-N // 100))[:N])   # 1% Hit
        filtered = drain(zk, cluster, "Hit")
        everything = drain(zk, cluster, "*")
    assert filtered["messages"] == -(-N // 100) and everything["messages"] == N
    print(json.dumps({
        "bench": "tag_filter", "backlog": N, "match_ratio": 0.01, "body_bytes": len(BODY),
        "produce_messages_per_s": round(N / produce_s),
        "filtered": filtered, "all": everything,
        "filtered_vs_all_time": round(filtered["seconds"] / everything["seconds"], 3),
    }), flush=True)


if __name__ == "__main__":
    main()
