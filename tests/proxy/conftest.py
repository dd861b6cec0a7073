"""One broker group and one ``duomq proxy`` shared by a module's tests
(start-up costs seconds), and the official RocketMQ 5 Python client
(``rocketmq-python-client``, unchanged) pointed at the proxy."""

from __future__ import annotations

import time
import types
import uuid

import pytest

from duomq.client import PullConsumer
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


@pytest.fixture(scope="session")
def rmq():
    """The helpers below: ``rmq.producer``, ``rmq.message``, ``rmq.read_all``."""
    return types.SimpleNamespace(producer=rmq_producer, message=rmq_message, read_all=read_all)


def rmq_producer(config, topic):
    from rocketmq.v5.producer import Producer
    p = Producer(config, (topic,))
    p.startup()
    return p


def rmq_message(topic, body, **kw):
    from rocketmq.v5.model import Message
    m = Message()
    m.topic, m.body = topic, body
    for k, v in kw.items():
        setattr(m, k, v)
    return m


def read_all(cluster, topic, n, timeout_s=15.0):
    """Every message of the topic's queues, by duomq's own pull consumer."""
    got = []
    with PullConsumer("check", zookeeper=cluster.zookeeper, cluster=cluster.cluster) as c:
        deadline = time.monotonic() + timeout_s
        while len(got) < n and time.monotonic() < deadline:
            got = []
            for mq in c.queues(topic):
                got.extend(c.pull(mq, 0, 1000).messages)
            time.sleep(0.2)
    return got
