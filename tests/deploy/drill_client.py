"""A client pod's program for the container test (run inside a container of
the broker image, on the test's network): it sends unique messages
continuously (``duomq.drill.load.Workload``), writes its progress to
``OUT/progress.json`` every 0.2 s, and, once the test creates ``OUT/stop``,
reads the topic back from the masters and writes ``OUT/report.json``: the
drill's audit (attempted, acked, lost, duplicated...) and, for each fault
time the test wrote to ``OUT/faults`` (CLOCK_MONOTONIC, which the host and
its containers share), how long writes stopped: stored at all, and
answered SEND_OK."""

from __future__ import annotations

import argparse
import json
import logging
import os
import time

from duomq.drill.checker import ACKED, Round, check
from duomq.drill.load import Workload, read_back


def write(path: str, doc: dict) -> None:
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f)
    os.replace(path + ".tmp", path)


def faults(out: str) -> list[float]:
    try:
        with open(os.path.join(out, "faults")) as f:
            return [float(x) for x in f.read().split()]
    except FileNotFoundError:
        return []


def longest_gap(answers: list[float], fault: float, until: float) -> float | None:
    """The longest time without an answer from ``fault`` on, until
    ``until`` (the next fault, or when the load stopped; CLOCK_MONOTONIC
    seconds): how long writes stopped around the fault, which the time of
    the first answer after it cannot tell (a dying master still answers
    sends for a moment)."""
    times = [fault] + [x for x in answers if fault < x <= until]
    if len(times) < 2:
        return None
    gap, start = max((b - a, a) for a, b in zip(times, times[1:], strict=False))
    print(f"longest gap after the fault: {gap:.3f} s from +{start - fault:.3f} s", flush=True)
    return round(gap, 3)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--topic", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    # the client's view of a fault (route changes, retries) in the container's log
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    zookeeper, cluster = os.environ["DUOMQ_ZOOKEEPER"], os.environ["DUOMQ_CLUSTER"]
    load = Workload(zookeeper, cluster, a.topic, producers=a.workers, consumers=0).start()
    progress = os.path.join(a.out, "progress.json")
    while not os.path.exists(os.path.join(a.out, "stop")):
        if not any(t.is_alive() for t in load.threads):
            print("every producer thread has stopped", flush=True)
            return 1
        write(progress, {"acked": load.acked(), "statuses": load.statuses(),
                         "now": time.monotonic()})
        time.sleep(0.2)
    stopped = time.monotonic()
    load.stop()
    ts = faults(a.out)
    report = check("containers", load.journal(), read_back(zookeeper, cluster, a.topic),
                   [Round(i, "fault", t) for i, t in enumerate(ts)], durable=True)
    stored, ok = load.answered((*ACKED, "stored")), load.answered(ACKED)
    ends = ts[1:] + [stopped]
    after = [{"stored_gap_s": longest_gap(stored, t, end), "send_ok_gap_s": longest_gap(ok, t, end)}
             for t, end in zip(ts, ends, strict=True)]
    write(os.path.join(a.out, "report.json"),
          {**report.as_dict(), "after_faults": after})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
