"""The proxy's process: a gRPC server (grpcio, a thread per RPC) serving
``MessagingService`` in front of one duomq cluster, found through
ZooKeeper as every duomq client finds it."""

from __future__ import annotations

import logging
import socket
from concurrent import futures
from typing import Any

import grpc

from duomq.client import TransactionProducer
from duomq.common import metrics
from duomq.common.errors import ConfigError
from duomq.proxy.health import Health
from duomq.proxy.metrics import ProxyCollector
from duomq.proxy.protocol import rpc
from duomq.proxy.service import MessagingService
from duomq.proxy.transactions import PROXY_GROUP

log = logging.getLogger("duomq.proxy")

DEFAULT_PORT = 8081
WORKERS = 128              # RPCs at once: each client's Telemetry stream holds one


class ProxyServer:
    """``start()`` then ``stop()``; ``port`` is the bound one (0 asks for a
    free port). ``advertise``: the ``host:port`` routes name when a client
    names none (default: this host's name and the port)."""

    def __init__(self, zookeeper: str | None = None, cluster: str | None = None, *,
                 port: int = DEFAULT_PORT, host: str = "0.0.0.0", advertise: str | None = None,
                 workers: int = WORKERS, metrics_port: int = -1):
        self.zookeeper, self.cluster = zookeeper, cluster
        self.metrics_port = metrics_port      # -1: none; 0: a free one
        self._metrics_server: Any = None
        self.host, self.port, self.advertise, self.workers = host, port, advertise, workers
        self.producer: TransactionProducer | None = None
        self._server: grpc.Server | None = None

    @property
    def address(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        return f"{host}:{self.port}"

    def start(self) -> ProxyServer:
        self.producer = TransactionProducer(PROXY_GROUP, zookeeper=self.zookeeper,
                                            cluster=self.cluster)
        if self.producer.credentials is not None:   # it would act for anyone as its own user
            cluster = self.producer.cluster
            self.producer.close()
            raise ConfigError(f"cluster {cluster!r} is secured (auth = true), and the proxy "
                              f"does not check RocketMQ clients' credentials yet: it would "
                              f"serve every client as its own user; it fronts clusters "
                              f"without auth only")
        server = grpc.server(futures.ThreadPoolExecutor(self.workers,
                                                        thread_name_prefix="duomq-proxy"))
        try:
            bound = server.add_insecure_port(f"{self.host}:{self.port}")
        except RuntimeError:                  # (grpcio raises when it cannot bind)
            bound = 0
        if bound == 0:
            self.producer.close()
            raise ConfigError(f"the proxy cannot listen on {self.host}:{self.port} (in use, or "
                              f"not an address of this host)")
        self.port = bound
        own = self._advertised()
        service = MessagingService(self.producer, own, self.producer.config.max_message_bytes)
        rpc.add_MessagingServiceServicer_to_server(service, server)
        self.health = Health(self.producer, server)
        if self.metrics_port >= 0:
            self._metrics_server, self.metrics_port = metrics.serve(
                ProxyCollector(service.metrics, service.telemetry), self.host,
                self.metrics_port, "--metrics-port")
        server.start()
        self.health.start()
        self._server, self.service = server, service
        log.info("proxy serving apache.rocketmq.v2.MessagingService on %s:%d for cluster %s",
                 self.host, self.port, self.producer.cluster)
        return self

    def _advertised(self) -> tuple[str, int]:
        if self.advertise:
            host, _, port = self.advertise.rpartition(":")
            return host, int(port)
        host = socket.gethostname() if self.host in ("0.0.0.0", "::", "") else self.host
        return host, self.port

    def wait(self) -> None:
        if self._server is not None:
            self._server.wait_for_termination()

    def stop(self, grace_s: float = 2.0) -> None:
        if self._server is not None:
            self.health.stop()
            self.service.telemetry.close()
            self._server.stop(grace_s).wait()
            self.service.consuming.close()
            self.service.offsets.close()
            self._server = None
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
            self._metrics_server.server_close()
            self._metrics_server = None
        if self.producer is not None:
            self.producer.close()
            self.producer = None

    def __enter__(self) -> ProxyServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
