"""The broker's Prometheus metrics (``prometheus_client``), on ``/metrics`` of
``metrics_port``.

The hot paths only add to plain counters that one thread writes (the
serving thread; the flush thread for its fsync times): no lock and no
metric object per message. A scrape, on ``prometheus_client``'s own HTTP
thread, builds the metric families from a copy of those counters and from
the broker's state (``BrokerCollector``), so it never blocks the request
loop. Names are ``duomq_`` and RocketMQ 5's metric name where one exists
(``rocketmq_messages_in_total`` → ``duomq_messages_in_total``), with its
labels; there are no series per client id, and per queue only when asked.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections import defaultdict
from collections.abc import Callable, Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from duomq import __version__
from duomq.auth.credentials import METRICS_TOKEN, load_metrics_token
from duomq.broker.snapshot import BrokerSnapshot, QueueSnapshot, lag_by_topic
from duomq.common import metrics
from duomq.common.gc_pauses import GcWatch
from duomq.common.metrics import Histogram, busy_poll_families, labelled
from duomq.common.role import Role
from duomq.format import native
from duomq.proto import pb
from duomq.store.residency import TAIL_BYTES
from duomq.transport.busy_poll import BusyPoll

log = logging.getLogger(__name__)

_STATUS = {**{v: k for k, v in pb.Status.items()}, pb.OK: "SEND_OK"}
STORED = frozenset({pb.OK, pb.FLUSH_DISK_TIMEOUT, pb.FLUSH_SLAVE_TIMEOUT,
                    pb.SLAVE_NOT_AVAILABLE})      # a send with these statuses stored its batch


class BrokerMetrics:
    """What the request loop counts (serving thread only, unless noted)."""

    def __init__(self) -> None:
        self.messages_in: dict[str, int] = defaultdict(int)          # topic
        self.bytes_in = 0
        self.messages_out: dict[tuple[str, str], int] = defaultdict(int)   # (topic, group)
        self.bytes_out = 0
        self.send_results: dict[str, int] = defaultdict(int)         # status name
        self.requests: dict[int, Histogram] = defaultdict(Histogram)  # by request type
        self.fsync = Histogram()                                     # the flush thread's
        self.ack_wait = Histogram()     # a SYNC_FLUSH / SYNC send from stored to acked
        self.pull_hold = Histogram()    # a long poll from held to answered
        self.promotions = 0             # times this broker became master
        self.duplicates_refused = 0     # idempotent retries of batches stored before
        self.transaction_checks = 0     # check-backs sent (as master)
        self.transactions_discarded = 0  # rolled back after transaction_check_max check-backs
        self.timers_fired = 0           # timer messages delivered to their topics (as master)
        self.timers_recalled = 0        # timer messages recalled (as master)
        self.timers_rolled = 0          # timer messages copied forward before retention (master)
        self.timer_lag = Histogram()    # a timer fired, from its time to written
        self.truncations = 0            # times it cut its log to follow a new master
        self.retention_deleted = 0      # commit-log segments deleted by retention
        self.recovery_seconds = 0.0     # the store's recovery at start
        self.busy_poll: BusyPoll | None = None   # the serving loop's (its counts)
        self.links_lost = 0             # the slave's replication link (its thread's)
        self.gc: GcWatch | None = None  # collections' pauses (any thread), once started

    def link_lost(self) -> None:
        """The slave's replication link lost a connection (its thread)."""
        self.links_lost += 1

    def send_answered(self, status: int) -> None:
        """Every answer to a send (a deferred one included), by status: the
        client's SendStatus names (SEND_OK, FLUSH_DISK_TIMEOUT, ...), else the
        error's (TOPIC_NOT_EXIST, MESSAGE_TOO_LARGE, ...)."""
        self.send_results[_STATUS.get(status) or str(status)] += 1

    def pulled(self, request, status: int, response) -> None:
        """A pull answered (now or after being held)."""
        if status == pb.OK and response is not None:
            self.messages_out[(request.topic, request.consumer_group)] += response.count
            self.bytes_out += len(response.records)

    def stored(self, request) -> None:
        """A send's batch was stored (acked now or later)."""
        self.messages_in[request.topic] += request.count
        self.bytes_in += len(request.records)


class BrokerCollector(Collector):
    """Metric families at scrape time (prometheus_client's thread), from the
    serving thread's snapshots only: ``snapshot()`` (the last published) and
    ``queues()`` (per queue and consumer group, taken for this scrape; None
    when the serving thread did not answer in time)."""

    def __init__(self, config, counters: BrokerMetrics, snapshot: Callable[[], BrokerSnapshot],
                 queues: Callable[[], QueueSnapshot | None]) -> None:
        self.config = config
        self.counters = counters
        self.snapshot = snapshot
        self.queues = queues

    def collect(self) -> Iterator[Metric]:
        s, m, cfg = self.snapshot(), self.counters, self.config
        yield from _identity(cfg, s)
        yield from _traffic(m, s)
        yield from _histograms(m)
        if m.gc is not None:
            yield from m.gc.families()
        yield from _log(s)
        yield from _replication(cfg, m, s)
        yield from _transactions(m, s)
        yield from _disk(cfg)
        q = self.queues()
        if q is not None:
            if q.tail_resident is not None:
                yield GaugeMetricFamily(
                    "duomq_commitlog_tail_resident_ratio",
                    f"Fraction of the commit log's last {TAIL_BYTES >> 20} MiB in the page cache "
                    f"(1: recent reads never touch the disk)", value=q.tail_resident)
            if s.role is Role.MASTER:
                yield from consumer_lag(q, cfg.metrics_per_queue)
            if cfg.metrics_per_queue:
                yield queue_ends(q)


def _identity(cfg, s: BrokerSnapshot) -> Iterator[Metric]:
    info = GaugeMetricFamily("duomq_broker_info", "This broker: its group, id and role",
                             labels=["cluster", "group", "broker_id", "role"])
    info.add_metric([cfg.cluster, cfg.group, str(cfg.broker_id), s.role], 1)
    yield info
    build = GaugeMetricFamily("duomq_build_info", "This broker's version and what checks and "
                              "seals its records (c: format/_native.c; numpy: built without "
                              "a compiler, or DUOMQ_NATIVE=0)", labels=["version", "record_loops"])
    build.add_metric([__version__, native.kind()], 1)
    yield build
    yield GaugeMetricFamily("duomq_epoch", "The epoch this broker leads or follows",
                            value=s.epoch)


def _traffic(m: BrokerMetrics, s: BrokerSnapshot) -> Iterator[Metric]:
    yield labelled(CounterMetricFamily, "duomq_messages_in", "Messages stored, by topic",
                   ["topic"], dict(m.messages_in))
    yield CounterMetricFamily("duomq_throughput_in_bytes", "Bytes of records stored",
                              value=m.bytes_in)
    yield labelled(CounterMetricFamily, "duomq_messages_out", "Messages served to pulls",
                   ["topic", "consumer_group"], dict(m.messages_out))
    yield CounterMetricFamily("duomq_throughput_out_bytes", "Bytes of records served",
                              value=m.bytes_out)
    yield labelled(CounterMetricFamily, "duomq_send_results", "Send answers, by status",
                   ["status"], dict(m.send_results))
    yield CounterMetricFamily("duomq_duplicate_sends",
                              "Idempotent producers' retries of batches stored before: "
                              "answered, not stored again", value=m.duplicates_refused)
    yield CounterMetricFamily("duomq_pulls_redirected",
                              "Pulls answered with advice to read another member",
                              value=s.redirects)
    yield CounterMetricFamily("duomq_bad_requests", "Requests refused as malformed or "
                              "invalid", value=s.bad_requests)
    for port, counts in (("client", s.client_connections),
                         ("replication", s.replication_connections)):
        if counts is None:                     # the broker's own ports only (not libzmq's)
            continue
        open_now, opened, refused = counts
        yield GaugeMetricFamily(f"duomq_{port}_connections",
                                f"Connections open on the {port} port", value=open_now)
        yield CounterMetricFamily(f"duomq_{port}_connections_opened",
                                  f"Connections accepted on the {port} port", value=opened)
        yield CounterMetricFamily(f"duomq_{port}_connections_refused",
                                  f"Connections to the {port} port closed for breaking ZMTP "
                                  f"(a bad greeting, a frame over the bound, garbage)",
                                  value=refused)


def _histograms(m: BrokerMetrics) -> Iterator[Metric]:
    h = HistogramMetricFamily("duomq_request_seconds",
                              "Time handling a request, by type (a deferred answer's wait "
                              "excluded)", labels=["request_type"])
    for type_, hist in sorted(dict(m.requests).items()):
        name = pb.RequestType.Name(type_) if type_ in pb.RequestType.values() else str(type_)
        h.add_metric([name], hist.buckets(), hist.total)
    yield h
    for name, hist, text in (
            ("duomq_fsync_seconds", m.fsync,
             "Commit-log fdatasync time (group commit under SYNC_FLUSH)"),
            ("duomq_ack_wait_seconds", m.ack_wait,
             "A send under SYNC_FLUSH or SYNC replication, from stored to acked"),
            ("duomq_pull_hold_seconds", m.pull_hold,
             "A long poll, from held to answered"),
            ("duomq_timer_fire_lag_seconds", m.timer_lag,
             "A timer message, from its delivery time to written to its topic (visible "
             "once durable under the group's policy)")):
        h = HistogramMetricFamily(name, text)
        h.add_metric([], hist.buckets(), hist.total)
        yield h


def _log(s: BrokerSnapshot) -> Iterator[Metric]:
    yield GaugeMetricFamily("duomq_commitlog_max_offset", "End of the commit log (bytes)",
                            value=s.max_offset)
    yield GaugeMetricFamily("duomq_commitlog_min_offset",
                            "Start of the commit log still kept (bytes)", value=s.min_offset)
    yield GaugeMetricFamily("duomq_commitlog_bytes", "Commit-log bytes kept (end minus "
                            "start)", value=s.max_offset - s.min_offset)
    yield GaugeMetricFamily("duomq_commitlog_segments", "Commit-log segment files",
                            value=s.segments)
    yield GaugeMetricFamily("duomq_confirmed_offset", "What consumers may read up to",
                            value=s.confirmed_offset)
    yield GaugeMetricFamily("duomq_store_writable", "1 while the store takes writes, 0 "
                            "while its last write failed (a full disk)",
                            value=0 if s.cannot_write else 1)


def _replication(cfg, m: BrokerMetrics, s: BrokerSnapshot) -> Iterator[Metric]:
    yield GaugeMetricFamily("duomq_in_sync_replicas",
                            "Master: slaves in sync now", value=s.in_sync_replicas)
    lag = GaugeMetricFamily("duomq_replication_lag_bytes",
                            "Bytes a slave lacks of its master's log: per slave as the "
                            "master sees it (seen_by=master: acked), and on the slave "
                            "(seen_by=slave)", labels=["slave_id", "seen_by"])
    for link in s.links:
        if link.broker_id >= 0:
            lag.add_metric([str(link.broker_id), "master"], link.lag_bytes)
    if s.following:
        lag.add_metric([str(cfg.broker_id), "slave"], s.lag_bytes)
    yield lag
    if s.following:
        yield GaugeMetricFamily("duomq_replication_lag_seconds",
                                "Slave: time since it last held all its master had "
                                "(-0.001: not caught up since it started)",
                                value=s.lag_ms / 1000)
    yield CounterMetricFamily("duomq_replication_links_lost",
                              "Slave: connections of the replication link lost and dialled "
                              "again (native link: silent past two ha_heartbeat_ms, not open "
                              "half of one after its dial, or closed by the master; either "
                              "link: silent past ha_housekeeping_ms)", value=m.links_lost)
    yield GaugeMetricFamily("duomq_degraded", "Master: 1 while SYNC sends are acked by "
                            "fewer slaves than sync_replicas", value=int(s.degraded))


def _transactions(m: BrokerMetrics, s: BrokerSnapshot) -> Iterator[Metric]:
    yield CounterMetricFamily("duomq_promotions", "Times this broker became master",
                              value=m.promotions)
    yield CounterMetricFamily("duomq_truncations", "Times this broker cut its log to "
                              "follow a new master", value=m.truncations)
    yield CounterMetricFamily("duomq_retention_deleted_segments",
                              "Commit-log segments deleted by retention",
                              value=m.retention_deleted)
    yield GaugeMetricFamily("duomq_recovery_seconds", "The store's recovery at start",
                            value=m.recovery_seconds)
    if m.busy_poll is not None:
        bp = m.busy_poll
        yield from busy_poll_families("duomq_busy_poll", "the serving loop", "its requests",
                                      "a request",
                                      bp.spins, bp.caught, bp.spent_ns / 1e9)
    yield GaugeMetricFamily("duomq_transactions_pending",
                            "Master: transactions whose half message waits for an end",
                            value=s.transactions_pending)
    inflight = GaugeMetricFamily("duomq_share_inflight", "Master: a share group's messages "
                                 "delivered and not acked (in flight, or waiting to be "
                                 "delivered again)", labels=["group"])
    redeliveries = CounterMetricFamily("duomq_share_redeliveries", "Master: a share group's "
                                       "deliveries past a message's first (over the share "
                                       "log)", labels=["group"])
    dead = CounterMetricFamily("duomq_share_dead_lettered", "Master: a share group's messages "
                               "moved to its dead-letter queue after max_deliveries (over "
                               "the share log)", labels=["group"])
    for group, (held, again, moved) in sorted(s.share.items()):
        inflight.add_metric([group], held)
        redeliveries.add_metric([group], again)
        dead.add_metric([group], moved)
    yield inflight
    yield redeliveries
    yield dead
    yield labelled(GaugeMetricFamily, "duomq_timers_pending", "Master: timer messages "
                   "stored and not delivered or recalled yet, by topic", ["topic"],
                   s.timers_pending)
    yield CounterMetricFamily("duomq_timers_fired", "Master: timer messages delivered to "
                              "their topics when due", value=m.timers_fired)
    yield CounterMetricFamily("duomq_timers_recalled", "Master: timer messages recalled "
                              "before they came due", value=m.timers_recalled)
    yield CounterMetricFamily("duomq_timers_rolled", "Master: timer messages due beyond "
                              "the commit log's retention copied forward (a new copy, the "
                              "old one left to retention)", value=m.timers_rolled)
    yield CounterMetricFamily("duomq_transaction_checks", "Check-backs sent to producers",
                              value=m.transaction_checks)
    yield CounterMetricFamily("duomq_transactions_discarded",
                              "Transactions rolled back after transaction_check_max "
                              "check-backs without an end", value=m.transactions_discarded)


def _disk(cfg) -> Iterator[Metric]:
    try:
        disk = shutil.disk_usage(os.path.abspath(cfg.data_dir))
        free, total = disk.free, disk.total
    except OSError:
        free = total = -1
    yield GaugeMetricFamily("duomq_disk_free_bytes", "Free bytes on the store's disk",
                            value=free)
    yield GaugeMetricFamily("duomq_disk_total_bytes", "Size of the store's disk",
                            value=total)


def queue_ends(q: QueueSnapshot) -> Metric:
    """``metrics_per_queue``: each queue's end (what consumers may read up to)."""
    return labelled(GaugeMetricFamily, "duomq_queue_max_offset",
                    "A queue's end: the offset after its last readable message",
                    ["topic", "queue_id"],
                    {(topic, str(qid)): end for (topic, qid), end in q.queue_ends.items()})


def consumer_lag(q: QueueSnapshot, per_queue: bool = False) -> Iterator[Metric]:
    """Per topic and consumer group, from the committed offsets: messages
    not yet consumed up to what consumers may read, and the age of the
    oldest of them (its store timestamp)."""
    lag, age = lag_by_topic(q)
    labels = ["topic", "consumer_group"]
    yield labelled(GaugeMetricFamily, "duomq_consumer_lag_messages",
                   "Messages a consumer group has not committed past, by topic", labels, lag)
    yield labelled(GaugeMetricFamily, "duomq_consumer_lag_latency_seconds",
                   "Age of the oldest message a consumer group has not committed past", labels,
                   {k: age[k] if n else 0.0 for k, n in lag.items()})
    if per_queue:
        yield labelled(GaugeMetricFamily, "duomq_consumer_queue_lag_messages",
                       "metrics_per_queue: a consumer group's lag on each queue",
                       [*labels, "queue_id"],
                       {(topic, group, str(qid)): n for (group, topic, qid), (n, _a)
                        in q.lag.items()})


def serve(collector: BrokerCollector, host: str, port: int,
          token: str | None = None) -> tuple[object, int]:
    """Start ``/metrics`` on ``host:port`` (0: a free port), behind ``token``."""
    return metrics.serve(collector, host, port, token=token)


def metrics_endpoint(cfg) -> tuple[str, str | None]:
    """Where ``/metrics`` listens and the token a scrape must carry. With
    auth, every scrape carries ``auth_dir/metrics.token`` (its series name
    every topic and group); an auth_dir without one (made before this
    release) serves on loopback alone, and says so."""
    host = cfg.metrics_host or cfg.listen_host
    if not cfg.auth:
        return host, None
    token = load_metrics_token(cfg.auth_dir)
    if token is None:
        log.warning("auth = true but %s has no %s: /metrics is served on 127.0.0.1 alone "
                    "(duomq auth metrics-token --auth-dir %s writes one; give Prometheus "
                    "the same)", cfg.auth_dir, METRICS_TOKEN, cfg.auth_dir)
        return "127.0.0.1", None
    return host, token
