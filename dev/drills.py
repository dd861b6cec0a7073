"""Failover drills: continuous load with every outcome recorded, an audit that
reads everything back, and a JSON report: attempted, acked (full and
degraded), lost, unexpected, duplicated, failover seconds."""

from __future__ import annotations

import collections
import json
import os
import threading
import time
from dataclasses import asdict, dataclass, field

from duomq.client import Message, Producer, PullConsumer, PullStatus, SendStatus

REPORT_DIR = os.environ.get("DRILL_REPORT_DIR", os.path.join(os.getcwd(), ".drills"))


@dataclass
class DrillReport:
    name: str
    attempted: int = 0
    acked_full: int = 0          # SEND_OK
    acked_degraded: int = 0      # stored, not durable: FLUSH_*_TIMEOUT, SLAVE_NOT_AVAILABLE
    failed: int = 0              # an error: nothing known to be stored
    lost: int = 0                # SEND_OK but never consumed afterwards
    unexpected: int = 0          # consumed but never attempted
    duplicated: int = 0          # consumed more than once
    failover_s: float | None = None   # fault to the first stored answer after it (writes back)
    sync_restored_s: float | None = None  # fault to the first SEND_OK after it
    statuses: dict = field(default_factory=dict)
    notes: dict = field(default_factory=dict)

    def write(self) -> str:
        os.makedirs(REPORT_DIR, exist_ok=True)
        path = os.path.join(REPORT_DIR, f"{self.name}.json")
        with open(path, "w") as f:
            json.dump(asdict(self), f, indent=2, sort_keys=True)
        print(f"drill {self.name}: " + json.dumps(asdict(self), sort_keys=True))
        return path


class LoadGenerator:
    """``workers`` producer threads sending unique bodies until stopped."""

    def __init__(self, zookeeper: str, cluster: str, topic: str, workers: int = 2,
                 **producer_settings):
        self.zookeeper, self.cluster, self.topic = zookeeper, cluster, topic
        self.settings = producer_settings
        self.outcomes: dict[bytes, str] = {}
        # (started, answered) of each send answered SEND_OK / stored (OK or degraded)
        self.ok_times: list[tuple[float, float]] = []
        self.stored_times: list[tuple[float, float]] = []
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.threads = [threading.Thread(target=self._work, args=(w,), daemon=True)
                        for w in range(workers)]

    def start(self) -> LoadGenerator:
        for t in self.threads:
            t.start()
        return self

    def _work(self, worker: int) -> None:
        with Producer(self.zookeeper, self.cluster, **self.settings) as p:
            seq = 0
            while not self.stop_event.is_set():
                body = b"w%d-%08d" % (worker, seq)
                seq += 1
                with self.lock:
                    self.outcomes[body] = "pending"
                started = time.monotonic()
                try:
                    status = p.send(Message(self.topic, body)).status.value
                except Exception as exc:
                    status = "ERROR:" + type(exc).__name__
                    time.sleep(0.05)
                with self.lock:
                    self.outcomes[body] = status
                    if status == SendStatus.SEND_OK.value:
                        self.ok_times.append((started, time.monotonic()))
                    if not status.startswith("ERROR"):
                        self.stored_times.append((started, time.monotonic()))

    def acked(self) -> int:
        with self.lock:
            return len(self.ok_times)

    def first_ok_after(self, t: float) -> float | None:
        """When the first send started after ``t`` was answered SEND_OK."""
        with self.lock:
            later = [done for started, done in self.ok_times if started > t]
        return min(later) if later else None

    def first_stored_after(self, t: float) -> float | None:
        """When the first send started after ``t`` was stored (any status)."""
        with self.lock:
            later = [done for started, done in self.stored_times if started > t]
        return min(later) if later else None

    def stop(self) -> None:
        self.stop_event.set()
        for t in self.threads:
            t.join(30)


def read_all(zookeeper: str, cluster: str, topic: str, group: str = "drill-audit") -> list[bytes]:
    """Every body stored in ``topic``, read from each queue's master."""
    bodies: list[bytes] = []
    with PullConsumer(zookeeper, cluster, group=group) as c:
        for mq in c.queues(topic):
            off = c.min_offset(mq)
            while (r := c.pull(mq, off, 1000)).status is PullStatus.FOUND:
                bodies.extend(m.body for m in r.messages)
                off = r.next_offset
    return bodies


def audit(name: str, load: LoadGenerator, consumed: list[bytes],
          fault_at: float | None = None) -> DrillReport:
    counts = collections.Counter(consumed)
    outcomes = dict(load.outcomes)
    statuses = collections.Counter(outcomes.values())
    full = {b for b, s in outcomes.items() if s == SendStatus.SEND_OK.value}
    degraded = {b for b, s in outcomes.items()
                if s in (SendStatus.FLUSH_DISK_TIMEOUT.value, SendStatus.FLUSH_SLAVE_TIMEOUT.value,
                         SendStatus.SLAVE_NOT_AVAILABLE.value)}
    first_ok = load.first_ok_after(fault_at) if fault_at is not None else None
    first_stored = load.first_stored_after(fault_at) if fault_at is not None else None
    return DrillReport(
        name=name, attempted=len(outcomes), acked_full=len(full), acked_degraded=len(degraded),
        failed=sum(v for k, v in statuses.items() if k.startswith("ERROR") or k == "pending"),
        lost=len(full - set(counts)), unexpected=len(set(counts) - set(outcomes)),
        duplicated=sum(n - 1 for n in counts.values() if n > 1),
        failover_s=_since(first_stored, fault_at), sync_restored_s=_since(first_ok, fault_at),
        statuses=dict(statuses))


def _since(t: float | None, fault_at: float | None) -> float | None:
    return round(t - fault_at, 3) if t is not None and fault_at is not None else None
