#!/usr/bin/env python3
"""Transactional sends against plain sends, in one run, on one ASYNC_FLUSH
master: 100-byte messages, a local
transaction that commits at once. One outstanding (one thread, each send
waiting for its answer; a transaction is its half message plus its end,
two round trips and two writes) and THREADS concurrent ones (each thread
one outstanding), alternated plain / transactional ROUNDS times. One JSON
line: per round the rates, the medians and the ratios (transactional /
plain).

N=2000 sends per thread and round by default; BENCH_QUICK=1: 500, 2 rounds.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import threading
import time

from one_broker import one_broker

from duomq.client import Message, Producer, TransactionProducer, TransactionState

QUICK = os.environ.get("BENCH_QUICK") == "1"
N = int(os.environ.get("N", 500 if QUICK else 2000))
ROUNDS = int(os.environ.get("ROUNDS", 2 if QUICK else 3))
THREADS = int(os.environ.get("THREADS", 8))
BODY = b"x" * 100


def commit(msg, arg):
    return TransactionState.COMMIT


def run(producer, transactional: bool, threads: int) -> float:
    """Messages per second: ``threads`` threads, each ``N`` sends in a row."""
    msg = Message("Tx", BODY)
    failures = []

    def worker():
        for _ in range(N):
            if transactional:
                r = producer.send_in_transaction(msg, commit)
                ok = r.local_state is TransactionState.COMMIT
            else:
                ok = producer.send(msg).ok
            if not ok:
                failures.append(1)
    ts = [threading.Thread(target=worker) for _ in range(threads)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    seconds = time.perf_counter() - t0
    if failures:
        raise RuntimeError(f"{len(failures)} sends did not commit")
    return threads * N / seconds


def main() -> int:
    rounds = []
    with one_broker("TxBench", "Tx", 4, flush="ASYNC_FLUSH") as (zk, cluster):
        with Producer(zookeeper=zk, cluster=cluster) as plain, \
                TransactionProducer("tx-bench", zookeeper=zk, cluster=cluster) as tx:
            run(plain, False, 1)                       # warm up both
            run(tx, True, 1)
            for r in range(ROUNDS):
                for transactional in ((False, True) if r % 2 == 0 else (True, False)):
                    p = tx if transactional else plain
                    rounds.append({"transactional": transactional,
                                   "one_outstanding": round(run(p, transactional, 1)),
                                   f"threads_{THREADS}": round(run(p, transactional, THREADS))})
    out: dict = {"bench": "transactions", "brokers": "ASYNC_FLUSH master", "n_per_thread": N,
                 "body_bytes": len(BODY), "rounds": rounds}
    for figure in ("one_outstanding", f"threads_{THREADS}"):
        t = statistics.median(x[figure] for x in rounds if x["transactional"])
        p = statistics.median(x[figure] for x in rounds if not x["transactional"])
        out[figure] = {"transactional": t, "plain": p, "ratio": round(t / p, 3)}
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
