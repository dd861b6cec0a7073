"""Consumer-group hand-offs under load, counted (the tests assert on these
figures, ``bench/handoff_bench.py`` reports them): a backlog of ``n``
messages on a topic is drained by a group while a member joins, leaves
cleanly, or is killed with kill -9, and every delivery is recorded as
``(queue, offset)`` so that re-deliveries are counted exactly.

Each message costs its handler ``work_s`` (a sleep: 20 consume threads run
them side by side), so a backlog takes seconds to drain, as a real
application's does. A member is an in-process ``PushConsumer`` except the
killed one, a process of its own (``python -m duomq.testing.handoff``) that
prints each delivery as it is made."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from typing import Any

from duomq.client import PullConsumer, PushConsumer
from duomq.dev.brokers import wait_for

Delivery = tuple[str, int, int]          # (broker group, queue id, queue offset)


class Deliveries:
    """Every delivery of a group's members, by member."""

    def __init__(self) -> None:
        self.by_member: dict[str, list[Delivery]] = {}
        self.lock = threading.Lock()

    def handler(self, member: str, work_s: float = 0.0):
        seen = self.by_member.setdefault(member, [])
        lock = self.lock

        def on_message(m) -> None:
            if work_s:
                time.sleep(work_s)
            with lock:
                seen.append((m.broker_group, m.queue_id, m.queue_offset))
        return on_message

    def add(self, member: str, items: list[Delivery]) -> None:
        with self.lock:
            self.by_member.setdefault(member, []).extend(items)

    def total(self) -> int:
        with self.lock:
            return sum(map(len, self.by_member.values()))

    def unique(self) -> int:
        with self.lock:
            return len({d for seen in self.by_member.values() for d in seen})

    def duplicates(self) -> Counter:
        """Deliveries seen more than once (any member), with their counts."""
        with self.lock:
            c = Counter(d for seen in self.by_member.values() for d in seen)
        return Counter({d: k - 1 for d, k in c.items() if k > 1})

    def figures(self, n: int) -> dict[str, Any]:
        dups = self.duplicates()
        with self.lock:
            per = {m: len(s) for m, s in self.by_member.items()}
        return {"messages": n, "deliveries": sum(per.values()), "unique": self.unique(),
                "duplicates": sum(dups.values()), "by_member": per}


def unowned_ms(old: PushConsumer, new: PushConsumer) -> list[float]:
    """Per queue moved from ``old`` to ``new``: ms from the old owner
    stopping its pulls to the new owner taking the queue (none before the
    fenced hand-off existed)."""
    if not hasattr(old.rebalancer, "releaser"):
        return []
    stopped = {r["mq"]: r["stopped"] for r in old.rebalancer.releaser.stats.released}
    taken: dict[str, float] = {}
    for a in new.rebalancer.releaser.stats.acquired:     # the first take after the release
        t0 = stopped.get(a["mq"])
        if t0 is not None and a["acquired"] >= t0 and a["mq"] not in taken:
            taken[a["mq"]] = (a["acquired"] - t0) * 1000
    return list(taken.values())


WORK_S = 0.001              # each message's handler time


def _member(zk: str, cluster: str, group: str, topic: str, rec: Deliveries, name: str,
            work_s: float = WORK_S, **settings) -> PushConsumer:
    return PushConsumer(group, topic=topic, on_message=rec.handler(name, work_s), zookeeper=zk,
                        cluster=cluster,
                        consume_from="first", **settings).start()


def _finish(rec: Deliveries, n: int, timeout_s: float) -> None:
    wait_for(lambda: rec.unique() >= n, timeout_s, what=f"all {n} messages consumed")
    time.sleep(0.3)             # late re-deliveries, if any, are counted too


def _result(rec: Deliveries, n: int, a: PushConsumer, b: PushConsumer, *,
            old: PushConsumer, new: PushConsumer) -> dict[str, Any]:
    """Once all ``n`` are consumed: the counts, the unowned time of the queues
    ``old`` handed to ``new``, and each member's hand-offs (none before the
    fenced hand-off existed)."""
    _finish(rec, n, 120)
    out = rec.figures(n)
    out["unowned_ms"] = _spread(unowned_ms(old, new))
    out["handoffs"] = {"a": getattr(a, "handoffs", None), "b": getattr(b, "handoffs", None)}
    return out


def join(zk: str, cluster: str, topic: str, n: int, group: str = "handoff-join",
         at: float = 0.25, **settings: Any) -> dict[str, Any]:
    """One member drains; a second joins once ``at`` of the backlog is consumed."""
    rec = Deliveries()
    a = _member(zk, cluster, group, topic, rec, "a", **settings)
    b = None
    try:
        wait_for(lambda: rec.total() >= at * n, 60, what="the first member under way")
        b = _member(zk, cluster, group, topic, rec, "b", **settings)
        return _result(rec, n, a, b, old=a, new=b)
    finally:
        a.shutdown()
        if b is not None:
            b.shutdown()


def leave(zk: str, cluster: str, topic: str, n: int, group: str = "handoff-leave",
          at: float = 0.3, **settings: Any) -> dict[str, Any]:
    """Two members drain; one shuts down cleanly once ``at`` is consumed."""
    rec = Deliveries()
    a = _member(zk, cluster, group, topic, rec, "a", **settings)
    b = _member(zk, cluster, group, topic, rec, "b", **settings)
    try:
        wait_for(lambda: a.held() and b.held() and rec.total() >= at * n, 60,
                 what="both members under way")
        b.shutdown()
        return _result(rec, n, a, b, old=b, new=a)
    finally:
        a.shutdown()
        b.shutdown()


def kill(zk: str, cluster: str, topic: str, n: int, group: str = "handoff-kill",
         at: float = 0.3, work_s: float = WORK_S, **settings: Any) -> dict[str, Any]:
    """Two members drain, one a process of its own killed with kill -9 once
    ``at`` is consumed. Besides the duplicates: ``uncommitted``, what the
    dead member had consumed past its group's commits at the kill (the most
    it may re-deliver), and ``beyond``, re-deliveries outside that set (must
    be 0)."""
    rec = Deliveries()
    a = _member(zk, cluster, group, topic, rec, "a", work_s, **settings)
    proc = subprocess.Popen(
        [sys.executable, "-m", "duomq.testing.handoff", zk, cluster, group, topic, str(work_s),
         json.dumps(settings)], stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True)
    reader.start()
    try:
        # the killed member must have delivered some before it dies: holding
        # queues is not enough (on a slow machine ``a`` alone reaches ``at``)
        wait_for(lambda: len(a.held()) < 8 and lines and rec.total() + len(lines) >= at * n,
                 60, what="both members under way")
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        reader.join(5)
        dead = []
        for line in lines:
            g, q, o = line.split()
            dead.append((g, int(q), int(o)))
        rec.add("killed", dead)
        with PullConsumer(group, zookeeper=zk, cluster=cluster) as pc:
            committed = {(q.broker_group, q.queue_id): pc.committed(q) for q in pc.queues(topic)}
        uncommitted = {d for d in dead if d[2] >= committed.get(d[:2], -1)}
        _finish(rec, n, 120)
        out = rec.figures(n)
        dups = rec.duplicates()
        out["uncommitted"] = len(uncommitted)
        out["beyond"] = sum(k for d, k in dups.items() if d not in uncommitted)
        return out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(5)
        if proc.stdout is not None:
            proc.stdout.close()
        a.shutdown()


def _member_process(zk: str, cluster: str, group: str, topic: str, work_s: float,
                    settings: dict) -> None:
    """The killed member: prints ``group queue offset`` per delivery, until killed."""
    out, lock = sys.stdout, threading.Lock()

    def on_message(m) -> None:
        time.sleep(work_s)
        with lock:
            out.write(f"{m.broker_group} {m.queue_id} {m.queue_offset}\n")
            out.flush()

    PushConsumer(group, topic=topic, on_message=on_message, zookeeper=zk, cluster=cluster,
                 consume_from="first",
                 **settings).start()
    threading.Event().wait()


def _spread(values: list[float]) -> dict[str, float]:
    if not values:
        return {"queues": 0}
    values = sorted(values)
    return {"queues": len(values), "p50": round(values[len(values) // 2], 1),
            "max": round(values[-1], 1)}


if __name__ == "__main__":
    _zk, _cluster, _group, _topic, _work, _settings = sys.argv[1:7]
    _member_process(_zk, _cluster, _group, _topic, float(_work), json.loads(_settings))
