"""The proxy's Prometheus metrics, on ``/metrics`` of ``--metrics-port``:
RPCs by name and the protocol's status code, their latency, the clients
by type and language, the Telemetry streams open. Handlers add to plain
dicts under one lock; a scrape builds the families from copies
(``common.metrics``)."""

from __future__ import annotations

import threading
from collections import defaultdict

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from duomq import __version__
from duomq.common.metrics import Histogram, labelled
from duomq.proxy.protocol import d


class ProxyMetrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.rpcs: dict[tuple[str, str], int] = defaultdict(int)     # (rpc, code) -> n
        self.latency: dict[str, Histogram] = defaultdict(Histogram)  # rpc -> seconds
        self.streams_open = 0

    def done(self, rpc: str, code: int, seconds: float) -> None:
        name = d.Code.Name(code) if code in d.Code.values() else str(code)
        with self._lock:
            self.rpcs[(rpc, name)] += 1
            self.latency[rpc].observe(seconds)

    def stream(self, delta: int) -> None:
        with self._lock:
            self.streams_open += delta


class ProxyCollector(Collector):
    def __init__(self, metrics: ProxyMetrics, telemetry):
        self.metrics, self.telemetry = metrics, telemetry

    def collect(self):
        m = self.metrics
        with m._lock:
            rpcs = dict(m.rpcs)
            latency = {k: (h.buckets(), h.total) for k, h in m.latency.items()}
            streams = m.streams_open
        yield labelled(CounterMetricFamily, "duomq_proxy_rpcs",
                       "RPCs answered, by RPC and the protocol's status code",
                       ["rpc", "code"], rpcs)
        h = HistogramMetricFamily("duomq_proxy_rpc_seconds", "RPC latency (a stream's: its "
                                  "whole life)", labels=["rpc"])
        for rpc, (buckets, total) in sorted(latency.items()):
            h.add_metric([rpc], buckets, total)
        yield h
        clients: dict[tuple[str, str], int] = defaultdict(int)
        for sess in self.telemetry.snapshot():
            clients[(d.ClientType.Name(sess.client_type),
                     d.Language.Name(sess.language) if sess.language in d.Language.values()
                     else str(sess.language))] += 1
        yield labelled(GaugeMetricFamily, "duomq_proxy_clients",
                       "clients known to this proxy, by type and language",
                       ["type", "language"], clients)
        yield GaugeMetricFamily("duomq_proxy_streams_open", "Telemetry streams open",
                                value=streams)
        info = GaugeMetricFamily("duomq_proxy_build_info", "the proxy's version",
                                 labels=["version"])
        info.add_metric([__version__], 1)
        yield info
