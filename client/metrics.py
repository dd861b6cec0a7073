"""A producer's or consumer's Prometheus metrics, on ``/metrics`` of
``metrics_port`` when the user gives one (``-1``, the default: none; ``0``:
a free port, read back from ``client.metrics_url``).

Clients write from many threads (the caller's, the remoting I/O thread, the
consume threads), so every thread adds to its own *shard* of plain counters
and ``Histogram`` objects: no lock and no lost update on the hot path, and a
scrape (prometheus_client's thread) sums the shards. A consumer's per-message
figures cost one clock read and one bucket search per message; the rest is
counted once per request or per chunk.

Names follow RocketMQ 5's client metrics where one exists
(``rocketmq_send_cost_time`` → ``duomq_send_cost_time_seconds``,
``rocketmq_process_time``, ``rocketmq_await_time``,
``rocketmq_delivery_latency``), in seconds as Prometheus has it. The labels
are topic, consumer group and outcome: a client's own endpoint names the
client, so there is no client-id label.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from duomq.common.metrics import Histogram, busy_poll_families, labelled

SUCCESS, FAILURE = "success", "failure"      # RocketMQ's invocation_status


@dataclass(frozen=True)
class Spec:
    name: str                   # without duomq_ and without the _seconds / _total suffix
    kind: str                   # histogram | counter
    text: str
    labels: tuple[str, ...]


SPECS = {s.name: s for s in (
    Spec("send_cost_time", "histogram", "A send (one message or a batch), from the call to "
         "its result or error, retries included", ("topic", "invocation_status")),
    Spec("send_results", "counter", "Sends by outcome: SEND_OK, FLUSH_DISK_TIMEOUT, "
         "FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE, or the error's class",
         ("topic", "status")),
    Spec("messages_sent", "counter", "Messages in sends that stored them", ("topic",)),
    Spec("pull_cost_time", "histogram", "A pull, from request to answer (a long poll's "
         "hold at the broker included)", ("topic", "consumer_group")),
    Spec("pull_results", "counter", "Pulls by outcome: FOUND, NO_NEW_MSG, NO_MATCHED_MESSAGE, "
         "OFFSET_ILLEGAL, or the error's class", ("topic", "consumer_group", "status")),
    Spec("delivery_latency", "histogram", "From a message's store time at the broker to its "
         "arrival here (the first message of each pulled batch)",
         ("topic", "consumer_group")),
    Spec("await_time", "histogram", "Time pulled messages waited here for a consume thread "
         "(each chunk's first message)", ("topic", "consumer_group")),
    Spec("process_time", "histogram", "The message listener's time per message, by outcome "
         "(failure: it raised)", ("topic", "consumer_group", "invocation_status")),
)}


class Shard:
    """One thread's counters: ``hist`` and ``count`` keyed by (spec name,
    *label values)."""

    __slots__ = ("hist", "count")

    def __init__(self) -> None:
        self.hist: dict[tuple, Histogram] = {}
        self.count: dict[tuple, int] = defaultdict(int)

    def histogram(self, key: tuple) -> Histogram:
        h = self.hist.get(key)
        if h is None:
            h = self.hist[key] = Histogram()
        return h


class ClientMetrics:
    def __init__(self) -> None:
        self._local = threading.local()
        self._shards: list[Shard] = []
        self._lock = threading.Lock()     # a new thread's first metric only

    def shard(self) -> Shard:
        """The calling thread's shard."""
        try:
            return self._local.shard
        except AttributeError:
            s = self._local.shard = Shard()
            with self._lock:
                self._shards.append(s)
            return s

    def observe(self, key: tuple, seconds: float) -> None:
        self.shard().histogram(key).observe(seconds)

    def add(self, key: tuple, n: int = 1) -> None:
        self.shard().count[key] += n

    def families(self) -> Iterator[Metric]:
        """Every spec's family, the shards summed (a scrape's thread)."""
        with self._lock:
            shards = list(self._shards)
        hists: dict[tuple, list[Histogram]] = defaultdict(list)
        counts: dict[tuple, int] = defaultdict(int)
        for s in shards:
            for key, h in dict(s.hist).items():
                hists[key].append(h)
            for key, n in dict(s.count).items():
                counts[key] += n
        for spec in SPECS.values():
            name = f"duomq_{spec.name}"
            if spec.kind == "counter":
                yield labelled(CounterMetricFamily, name, spec.text, list(spec.labels),
                               {k[1:]: n for k, n in counts.items() if k[0] == spec.name})
                continue
            f = HistogramMetricFamily(f"{name}_seconds", spec.text, labels=list(spec.labels))
            for key in sorted(k for k in hists if k[0] == spec.name):
                h = Histogram.merged(hists[key])
                f.add_metric(list(key[1:]), h.buckets(), h.total)
            yield f


def error_name(exc: BaseException | None) -> str:
    """An error's outcome label: its class (a bounded set)."""
    return type(exc).__name__


class ClientCollector(Collector):
    """A client's families at scrape time: who it is, the shards, and what
    the client reads from its own state (``client.metric_families()``)."""

    def __init__(self, client) -> None:
        self.client = client

    def collect(self) -> Iterator[Metric]:
        c = self.client
        info = GaugeMetricFamily("duomq_client_info", "This client: its kind, group and id",
                                 labels=["cluster", "kind", "group", "client_id"])
        info.add_metric([c.cluster, type(c).__name__, c.config.group, c.client_id], 1)
        yield info
        yield from c.metrics.families()
        yield from c.metric_families()
        if c.remoting.busy_poll_us:
            yield from busy_poll_families("duomq_client_busy_poll", "blocking calls",
                                          "their answers", "an answer", *c.remoting.busy_poll_counts())
