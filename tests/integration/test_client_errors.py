"""A client's calls raise duomq errors only, whatever ZooKeeper does: a
lost connection, an expired session and a refusal come back as the duomq
error that says so, with its retriable flag (kazoo's SessionExpiredError had
escaped Producer.send at the heal of a ZooKeeper outage)."""

import time

import pytest
from kazoo.exceptions import NoAuthError, SessionExpiredError

from duomq.client import Message, Producer, PullConsumer
from duomq.common.errors import (
    AuthorizationError,
    DuomqError,
    ZooKeeperUnavailableError,
)
from duomq.dev.zookeeper import launch
from duomq.testing.harness import LocalCluster

pytestmark = pytest.mark.integration


def test_zookeeper_gone_or_expired_is_a_duomq_error(tmp_path):
    zk = launch(data_dir=str(tmp_path / "zk"))
    c = LocalCluster(zk.connect, "Errors", str(tmp_path / "brokers"))
    try:
        c.add_broker("broker-a", 0)
        c.create_topic("Known", 1)
        p = Producer(zookeeper=zk.connect, cluster="Errors", send_timeout_ms=2000)
        reader = PullConsumer("g", zookeeper=zk.connect, cluster="Errors")
        assert p.send(Message("Known", b"x")).ok
        # a session that expired under a call (as kazoo raises it at an outage's heal)
        real = p.zk.exists
        for exc, want, retriable in ((SessionExpiredError(), ZooKeeperUnavailableError, True),
                                     (NoAuthError(), AuthorizationError, False)):
            p.zk.exists = lambda *a, e=exc, **k: (_ for _ in ()).throw(e)
            with pytest.raises(want) as got:
                p.send(Message("NeverSeen", b"x"))
            assert got.value.retriable is retriable and isinstance(got.value, DuomqError)
        p.zk.exists = real
        # ZooKeeper gone: calls that need it say so, as duomq errors
        zk.stop()
        for call in (lambda: p.send(Message("NeverSeen", b"x")),
                     lambda: reader.queues("Known")):
            t0 = time.monotonic()
            with pytest.raises(DuomqError) as got:
                call()
            assert got.value.retriable and time.monotonic() - t0 < 10, got.value
        p.close()
        reader.close()
    finally:
        for b in c.brokers:
            b.kill()                 # a graceful stop would wait for the dead ZooKeeper
        c.stop_all()
        zk.stop()
