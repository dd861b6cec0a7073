"""``duomq proxy``: serve RocketMQ 5's gRPC protocol
(``apache.rocketmq.v2.MessagingService``) in front of a duomq cluster, so
that the official RocketMQ clients (Java, Go, C++, C#, Node.js, Python,
Rust) work against it by changing one endpoint. Stateless: run as many as
you like; each finds the cluster through ZooKeeper."""

from __future__ import annotations

import logging
import signal
import threading

from duomq.cli.common import add_endpoint, add_metrics_port, endpoint
from duomq.common.errors import ConfigError


def add(sub) -> None:
    p = sub.add_parser("proxy", help="serve the RocketMQ 5 gRPC protocol (the official "
                                     "clients) in front of the cluster")
    add_endpoint(p)
    p.add_argument("--port", type=int, default=8081, help="the gRPC port (8081)")
    p.add_argument("--host", default="0.0.0.0", help="the address to listen on (0.0.0.0)")
    p.add_argument("--advertise", metavar="HOST:PORT",
                   help="the address routes name when a client names none (default: this "
                        "host's name and --port)")
    add_metrics_port(p)
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.set_defaults(func=run)


def run(args) -> int:
    from duomq.cli.broker_cmd import LOG_FORMAT
    from duomq.proxy.server import ProxyServer
    logging.basicConfig(level=args.log_level.upper(), format=LOG_FORMAT, force=True)
    if args.advertise and not _host_port(args.advertise):
        raise ConfigError(f"--advertise {args.advertise!r} is not HOST:PORT")
    zookeeper, cluster = endpoint(args)
    proxy = ProxyServer(zookeeper, cluster, port=args.port, host=args.host,
                        advertise=args.advertise, metrics_port=args.metrics_port).start()
    print(f"duomq proxy: apache.rocketmq.v2.MessagingService on {args.host}:{proxy.port} "
          f"for cluster {cluster} (ZooKeeper {zookeeper})"
          + (f"; metrics on http://{args.host}:{proxy.metrics_port}/metrics"
             if proxy.metrics_port >= 0 else ""), flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    proxy.stop()
    return 0


def _host_port(text: str) -> bool:
    host, _, port = text.rpartition(":")
    return bool(host) and port.isdigit() and 0 < int(port) < 65536
