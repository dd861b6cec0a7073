"""What the broker's and the clients' Prometheus metrics share: a histogram
cheap enough for hot paths, metric families built from plain dicts, and the
``/metrics`` HTTP server (``prometheus_client``'s own, on its daemon thread).

Writers only add to plain counters and ``Histogram`` objects that one thread
owns; a scrape builds the families from copies. No lock and no
``prometheus_client`` metric object sits on a hot path."""

from __future__ import annotations

import bisect
import hmac
import socket
import socketserver
import threading
from collections.abc import Iterable
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app, start_http_server
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from duomq.common.errors import ConfigError

# seconds: 50 µs to 10 s, the span of a request, an fsync, a held pull or a handler
BUCKETS = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
           0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_LE = (*map(str, BUCKETS), "+Inf")


class Histogram:
    """Bucket counts and their sum, written by one thread; read as a copy by
    the scrape (a list copy is atomic under the GIL)."""

    __slots__ = ("counts", "total", "n")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)
        self.total = 0.0
        self.n = 0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(BUCKETS, seconds)] += 1
        self.total += seconds
        self.n += 1

    def buckets(self) -> list[tuple[str, int]]:
        """Cumulative ``(le, count)`` pairs, ``+Inf`` last."""
        out, run = [], 0
        for le, c in zip(_LE, list(self.counts), strict=True):
            run += c
            out.append((le, run))
        return out

    @classmethod
    def merged(cls, parts: Iterable[Histogram]) -> Histogram:
        """One histogram holding every part's observations (the per-thread
        shards of a client's metric)."""
        out = cls()
        for p in parts:
            out.counts = [a + b for a, b in zip(out.counts, list(p.counts), strict=True)]
            out.total += p.total
            out.n += p.n
        return out


def labelled(family, name: str, text: str, labels: list[str], values: dict):
    """A metric family with one sample per key of ``values`` (a key is the
    label value, or a tuple of them). ``dict(values)`` copies atomically under
    the GIL, whatever a writer adds meanwhile."""
    f = family(name, text, labels=labels)
    for key, n in sorted(dict(values).items()):
        f.add_metric(list(key) if isinstance(key, tuple) else [key], n)
    return f


def busy_poll_families(prefix: str, who: str, waits_for: str, one: str, spins: int,
                       caught: int, seconds: float):
    """The three counters of a busy poll (``transport.busy_poll``): the
    broker's serving loop (``duomq_busy_poll_*``) and a client's blocking
    calls (``duomq_client_busy_poll_*``)."""
    yield CounterMetricFamily(f"{prefix}_spins", f"Times {who} asked for {waits_for} before "
                              f"sleeping (busy_poll_us)", value=spins)
    yield CounterMetricFamily(f"{prefix}_caught", f"Spins {one} ended (read without a wake-up)",
                              value=caught)
    yield CounterMetricFamily(f"{prefix}_seconds", f"Time {who} spent spinning (CPU)",
                              value=seconds)


def serve(collector: Collector, host: str, port: int, setting: str = "metrics_port",
          token: str | None = None) -> tuple[object, int]:
    """Start ``/metrics`` serving ``collector`` on ``host:port`` (0: a free
    port), on a daemon thread. With ``token``, a scrape must carry it
    (``Authorization: Bearer <token>``, Prometheus's ``authorization``);
    any other request is answered 401 and names nothing. Returns (server,
    port); a port that cannot be bound is a ConfigError naming ``setting``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    try:
        if token is None:
            server, _thread = start_http_server(port, addr=host, registry=registry)
        else:
            server = _serve_app(_bearer(make_wsgi_app(registry), token), host, port)
    except OSError as exc:
        raise ConfigError(f"{setting} {port}: cannot listen on {host}: "
                          f"{exc.strerror or exc}") from None
    return server, server.server_port


def _bearer(app, token: str):
    """``app`` behind a bearer token, compared in constant time."""
    want = f"Bearer {token}".encode()

    def guarded(environ, start_response):
        given = environ.get("HTTP_AUTHORIZATION", "").encode()
        if hmac.compare_digest(given, want):
            return app(environ, start_response)
        start_response("401 Unauthorized", [("Content-Type", "text/plain"),
                                            ("WWW-Authenticate", 'Bearer realm="duomq"')])
        return [b"a bearer token is needed (the cluster's metrics.token)\n"]
    return guarded


class _Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args) -> None:      # scrapes are not news
        pass


def _serve_app(app, host: str, port: int):
    server_cls = _Server
    if ":" in host:                                # an IPv6 address
        class _Server6(_Server):
            address_family = socket.AF_INET6
        server_cls = _Server6
    httpd = make_server(host, port, app, server_cls, handler_class=_Quiet)
    threading.Thread(target=httpd.serve_forever, name="duomq-metrics", daemon=True).start()
    return httpd
