"""The proxy's health on gRPC's standard health service (``grpc.health.v1``,
``grpcio-health-checking``): what Kubernetes' gRPC probes and
``grpc_health_probe`` ask. SERVING while its ZooKeeper session is
connected and some broker group has a master; NOT_SERVING else (the
overall service ``""`` and ``apache.rocketmq.v2.MessagingService`` alike),
looked at every second."""

from __future__ import annotations

import logging
import threading

from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from kazoo.protocol.states import KazooState

from duomq.proxy.protocol import SERVICE

log = logging.getLogger("duomq.proxy")

CHECK_EVERY_S = 1.0


def why_not_ready(producer) -> str:
    """"" when the proxy can serve; else what stops it, in one line."""
    if producer.zk.state != KazooState.CONNECTED:
        return f"no ZooKeeper session ({producer.zk.state})"
    try:
        groups = producer.zk.get_children(producer.paths.brokers)
    except Exception as exc:              # (a session lost meanwhile)
        return f"cannot list the broker groups: {exc}"
    for g in groups:
        if any(m.is_master for m in producer.members.of(g).values()):
            return ""
    return f"no broker group of cluster {producer.cluster!r} has a master"


class Health:
    def __init__(self, producer, server) -> None:
        self.producer = producer
        self.servicer = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.servicer, server)
        self.why = "starting"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="duomq-proxy-health",
                                        daemon=True)

    def start(self) -> None:
        self.check()
        self._thread.start()

    def check(self) -> None:
        why = why_not_ready(self.producer)
        if why != self.why:
            (log.info if not why else log.warning)(
                "proxy %s%s", "ready" if not why else "not ready: ", why)
        self.why = why
        state = health_pb2.HealthCheckResponse.SERVING if not why else \
            health_pb2.HealthCheckResponse.NOT_SERVING
        for name in ("", SERVICE):
            self.servicer.set(name, state)

    def _run(self) -> None:
        while not self._stop.wait(CHECK_EVERY_S):
            try:
                self.check()
            except Exception:                 # a check that broke: said, tried again
                log.exception("proxy health check failed")

    def stop(self) -> None:
        self._stop.set()
        self.servicer.enter_graceful_shutdown()
