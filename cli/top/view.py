"""What ``duomq top`` shows, from two snapshots (pure): per broker its role,
epoch, traffic rates and replication state; the busiest topics; the
consumer groups furthest behind. Rates are counter deltas over the time
between the snapshots (a counter that went down, a restarted broker, counts
from 0)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from duomq.cli.top.snapshot import Broker, Samples, Snapshot
from duomq.common.role import Role


@dataclass
class BrokerRow:
    group: str
    broker_id: int
    role: Role
    epoch: int
    address: str
    in_rate: float | None           # messages stored per second
    out_rate: float | None          # messages served per second
    in_sync: int | None             # a master's slaves in sync
    lag_bytes: float | None         # a slave's lag behind its master
    lag_s: float | None
    log_bytes: float | None
    disk_free: float | None         # fraction
    tail_cached: float | None       # fraction of the log's tail in the page cache
    # the replication links: a master's open connections from slaves (None on
    # libzmq's port, which does not count them), a slave's links lost and
    # dialled again since it started
    links_open: int | None = None
    links_lost: int | None = None
    error: str = ""


@dataclass
class TopicRow:
    topic: str
    in_rate: float | None
    stored: float
    timers: float = 0.0             # timer messages pending (masters' count)


@dataclass
class LagRow:
    topic: str
    group: str
    lag: float
    age_s: float
    out_rate: float | None


@dataclass
class View:
    brokers: list[BrokerRow]
    topics: list[TopicRow]
    lags: list[LagRow]
    groups_without_master: list[str]


def _one(s: Samples, name: str, **labels) -> float | None:
    return s.get((name, tuple(sorted(labels.items()))))


def _by(s: Samples, name: str, *keys: str) -> dict[tuple[str, ...], float]:
    """Sum of ``name``'s samples by the values of labels ``keys``."""
    out: dict[tuple[str, ...], float] = defaultdict(float)
    for (n, labels), v in s.items():
        if n == name:
            d = dict(labels)
            out[tuple(d.get(k, "") for k in keys)] += v
    return out


def _rate(cur: float | None, prev: float | None, dt: float) -> float | None:
    if cur is None or prev is None or dt <= 0:
        return None
    return (cur - prev) / dt if cur >= prev else cur / dt


def _int(v: float | None) -> int | None:
    return None if v is None else int(v)


def _total(s: Samples | None, name: str) -> float | None:
    """The sum of ``name``'s samples (0: none yet); None without a scrape."""
    if s is None:
        return None
    return sum(v for (n, _), v in s.items() if n == name)


def build(prev: Snapshot | None, cur: Snapshot, top: int = 10) -> View:
    dt = cur.at - prev.at if prev is not None else 0.0
    before: dict[tuple[str, int], Broker] = {
        (b.group, b.broker_id): b for b in (prev.brokers if prev is not None else [])}
    rows: list[BrokerRow] = []
    topic_in: dict[str, float] = defaultdict(float)
    topic_rate: dict[str, float] = defaultdict(float)
    topic_rated: set[str] = set()
    out_rate: dict[tuple[str, ...], float] = defaultdict(float)
    lag: dict[tuple[str, ...], float] = defaultdict(float)
    age: dict[tuple[str, ...], float] = defaultdict(float)
    masters: dict[str, int] = defaultdict(int)
    timers: dict[str, float] = defaultdict(float)
    for b in cur.brokers:
        s = b.samples
        old = before.get((b.group, b.broker_id))
        ps = old.samples if old is not None and not old.error else None
        role = b.info.role
        masters[b.group] += role is Role.MASTER
        lag_b = _one(s, "duomq_replication_lag_bytes", slave_id=str(b.broker_id),
                     seen_by="slave")
        free, total = _one(s, "duomq_disk_free_bytes"), _one(s, "duomq_disk_total_bytes")
        rows.append(BrokerRow(
            b.group, b.broker_id, role, b.info.epoch, b.info.address,
            _rate(_total(s, "duomq_messages_in_total"), _total(ps, "duomq_messages_in_total"), dt),
            _rate(_total(s, "duomq_messages_out_total"), _total(ps, "duomq_messages_out_total"),
                  dt),
            int(v) if role is Role.MASTER and (v := _one(s, "duomq_in_sync_replicas")) is not None
            else None,
            lag_b if role is not Role.MASTER else None,
            _one(s, "duomq_replication_lag_seconds") if role is not Role.MASTER else None,
            _one(s, "duomq_commitlog_bytes"),
            free / total if free is not None and total else None,
            _one(s, "duomq_commitlog_tail_resident_ratio"),
            _int(_one(s, "duomq_replication_connections")) if role is Role.MASTER else None,
            _int(_one(s, "duomq_replication_links_lost_total")) if role is not Role.MASTER
            else None,
            b.error))
        for (topic,), n in _by(s, "duomq_messages_in_total", "topic").items():
            topic_in[topic] += n
            if ps is not None:
                r = _rate(n, _by(ps, "duomq_messages_in_total", "topic").get((topic,), 0.0), dt)
                if r is not None:
                    topic_rate[topic] += r
                    topic_rated.add(topic)
        if ps is not None:
            old_out = _by(ps, "duomq_messages_out_total", "topic", "consumer_group")
            for key, n in _by(s, "duomq_messages_out_total", "topic", "consumer_group").items():
                r = _rate(n, old_out.get(key, 0.0), dt)
                if r is not None:
                    out_rate[key] += r
        if role is Role.MASTER:
            for (topic,), n in _by(s, "duomq_timers_pending", "topic").items():
                timers[topic] += n
                topic_in.setdefault(topic, 0.0)
            for key, n in _by(s, "duomq_consumer_lag_messages", "topic", "consumer_group").items():
                lag[key] += n
            for (name, labels), v in s.items():
                if name == "duomq_consumer_lag_latency_seconds":
                    d = dict(labels)
                    key = (d.get("topic", ""), d.get("consumer_group", ""))
                    age[key] = max(age[key], v)
    topics = sorted((TopicRow(t, topic_rate[t] if t in topic_rated else None, n,
                              timers.get(t, 0.0))
                     for t, n in topic_in.items()),
                    key=lambda r: (-(r.in_rate or 0.0), -r.stored, r.topic))[:top]
    lags = sorted((LagRow(t, g, n, age.get((t, g), 0.0),
                          out_rate.get((t, g), 0.0) if prev is not None else None)
                   for (t, g), n in lag.items()),
                  key=lambda r: (-r.lag, -r.age_s, r.topic, r.group))[:top]
    return View(rows, topics, lags, sorted(g for g, n in masters.items() if n == 0))
