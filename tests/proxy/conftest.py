"""One broker group and one ``duomq proxy`` shared by a module's tests
(start-up costs seconds), and the official RocketMQ 5 Python client
(``rocketmq-python-client``, unchanged) pointed at the proxy."""

from __future__ import annotations

import uuid

import pytest

from duomq.coordinator import zk as zkutil
from duomq.testing.harness import LocalCluster


@pytest.fixture(scope="module")
def proxied(zk_server, tmp_path_factory):
    """(cluster, proxy): a master of broker-a and a proxy in front of it."""
    from duomq.proxy.server import ProxyServer
    chroot = f"/duomqtest-{uuid.uuid4().hex[:12]}"
    zk = zkutil.connect(zk_server.connect)
    zk.ensure_path(chroot)
    cluster = LocalCluster(zk_server.connect + chroot, "ProxyCluster",
                           str(tmp_path_factory.mktemp("proxied")))
    cluster.add_broker("broker-a", 0)
    proxy = ProxyServer(cluster.zookeeper, cluster.cluster, port=0, host="127.0.0.1").start()
    try:
        yield cluster, proxy
    finally:
        proxy.stop()
        cluster.stop_all()
        try:
            zk.delete(chroot, recursive=True)
        except Exception:
            pass
        zkutil.close(zk)


@pytest.fixture
def topic(proxied):
    """A new topic of 4 queues on the shared cluster."""
    cluster, _proxy = proxied
    name = f"T{uuid.uuid4().hex[:8]}"
    cluster.create_topic(name, 4)
    return name


@pytest.fixture
def rmq_config(proxied):
    """The official client's configuration for the proxy (no credentials)."""
    from rocketmq.v5.client import ClientConfiguration, Credentials
    _cluster, proxy = proxied
    return ClientConfiguration(proxy.address, Credentials("", ""), request_timeout=5)
