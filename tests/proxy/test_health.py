"""The proxy's health on gRPC's standard health service: SERVING while it
reaches ZooKeeper and a master, NOT_SERVING (and why, in its log) when no
broker group has a master, SERVING again once one has."""

from __future__ import annotations

import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from duomq.proxy.protocol import SERVICE
from duomq.proxy.server import ProxyServer

SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, \
    health_pb2.HealthCheckResponse.NOT_SERVING


def state(stub, service=""):
    return stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=3).status


def wait_state(stub, want, timeout_s=15.0):
    deadline = time.monotonic() + timeout_s
    while state(stub) != want and time.monotonic() < deadline:
        time.sleep(0.2)
    return state(stub)


def test_readiness_follows_the_masters(local_cluster):
    b = local_cluster.add_broker("broker-a", 0)
    with ProxyServer(local_cluster.zookeeper, local_cluster.cluster, port=0,
                     host="127.0.0.1") as proxy:
        stub = health_pb2_grpc.HealthStub(grpc.insecure_channel(proxy.address))
        assert state(stub) == SERVING and state(stub, SERVICE) == SERVING
        b.stop()                                                 # the only master stops
        assert wait_state(stub, NOT_SERVING) == NOT_SERVING
        assert "has a master" in proxy.health.why
        local_cluster.add_broker("broker-b", 0)                  # another group's master
        assert wait_state(stub, SERVING) == SERVING and proxy.health.why == ""


def test_a_secured_cluster_is_refused_until_the_proxy_checks_credentials(secured):
    """The proxy would serve every RocketMQ client as its own user: on a
    cluster with auth it refuses to start, in one line."""
    import pytest

    from duomq.common.errors import ConfigError
    cluster = secured[0]
    with pytest.raises(ConfigError, match="secured"):
        ProxyServer(cluster.zookeeper, cluster.cluster, port=0, host="127.0.0.1").start()
