"""SASL (DIGEST-MD5) to a ZooKeeper ensemble that requires it: a real
server with a JAAS Server section and ``enforce.auth.enabled`` (the admin
guide's configuration), `duomq auth init --zookeeper-sasl` writing the
login every party uses, a secured pair and a plain broker logging in; a
client with no login or a wrong one is refused at once, saying why."""

import json
import os
import time

import pytest

from duomq.client import Message, Producer, PullConsumer
from duomq.common.errors import AuthenticationError
from duomq.coordinator import zk as zkutil
from duomq.dev.zookeeper import start_local
from duomq.testing.harness import LocalCluster, run_cli

pytestmark = pytest.mark.integration


@pytest.fixture
def sasl_keys(tmp_path):
    """`duomq auth init --zookeeper-sasl duomq`, and a ZooKeeper server that
    admits only that login; (keys dir, admin's credentials, the server)."""
    keys = tmp_path / "keys"
    said = run_cli("auth", "init", "--out", str(keys), "--zookeeper-sasl", "duomq").stdout
    login = (keys / "zookeeper.sasl").read_text().strip()
    user, password = login.split(":", 1)
    assert f'user_{user}="{password}";' in said        # the JAAS entry the ensemble needs
    assert json.loads((keys / "admin.json").read_text())["zookeeper"]["sasl"] == login
    server = start_local(str(tmp_path / "zk"), sasl_users={user: password})
    yield keys, str(keys / "admin.json"), server
    server.stop()


def refused(fn) -> str:
    started = time.monotonic()
    with pytest.raises(AuthenticationError) as info:
        fn()
    assert time.monotonic() - started < 5, "refused only after a timeout"
    return str(info.value)


def test_a_secured_cluster_on_an_ensemble_that_requires_sasl(sasl_keys, tmp_path, monkeypatch):
    keys, admin, server = sasl_keys
    zk = server.connect
    monkeypatch.setenv("DUOMQ_CREDENTIALS", admin)
    cluster = LocalCluster(zk, "SaslCluster", str(tmp_path / "brokers"))
    try:
        # the brokers log in with auth_dir/zookeeper.sasl
        cluster.add_broker("broker-a", 0, auth=True, auth_dir=str(keys))
        cluster.add_broker("broker-a", 1, auth=True, auth_dir=str(keys))
        cluster.create_topic("Orders", 2)
        with Producer(zookeeper=zk, cluster=cluster.cluster, credentials=admin) as p:
            assert p.send(Message("Orders", b"one")).ok
        endpoint = ["--zookeeper", zk, "--cluster", cluster.cluster]
        app = str(tmp_path / "app.json")
        run_cli("auth", "user", "add", "app", "--allow", "Topic:Orders:Sub", "--allow",
                "Group:g:Sub", "--out", app, *endpoint)
        assert "sasl" in json.loads((tmp_path / "app.json").read_text())["zookeeper"]
        got = []
        with PullConsumer("g", zookeeper=zk, cluster=cluster.cluster, credentials=app) as c:
            for mq in c.queues("Orders"):
                got += [m.body for m in c.pull(mq, 0, 10).messages]
        assert got == [b"one"]

        # no login: refused at once, in a client and in the CLI
        monkeypatch.delenv("DUOMQ_CREDENTIALS")
        said = refused(lambda: zkutil.connect(zk))
        assert "requires a SASL login" in said
        said = refused(lambda: Producer(zookeeper=zk, cluster=cluster.cluster))
        assert "requires a SASL login" in said
        p = run_cli("topic", "list", *endpoint, check=False)
        assert p.returncode == 2 and "requires a SASL login" in p.stderr, p.stderr
        # a wrong password
        wrong = tmp_path / "wrong.sasl"
        wrong.write_text("duomq:not-the-password\n")
        monkeypatch.setenv("DUOMQ_ZOOKEEPER_SASL_FILE", str(wrong))
        said = refused(lambda: zkutil.connect(zk))
        assert "refused the SASL login of 'duomq'" in said
    finally:
        cluster.stop_all()


def test_a_plain_broker_logs_in_with_its_sasl_file(sasl_keys, tmp_path, monkeypatch):
    keys, _admin, server = sasl_keys
    monkeypatch.delenv("DUOMQ_CREDENTIALS", raising=False)
    login = str(keys / "zookeeper.sasl")
    # without a login the broker stops at once, with one line saying why
    p = run_cli("broker", "--zookeeper", server.connect, "--cluster", "Plain", "--data-dir",
                str(tmp_path / "refused"), "--set", "port=0", "--set", "ha_port=0",
                "--set", "metrics_port=-1", check=False, timeout_s=60)
    assert p.returncode == 2 and "requires a SASL login" in p.stderr, p.stderr[-2000:]

    cluster = LocalCluster(server.connect, "Plain", str(tmp_path / "brokers"))
    try:
        monkeypatch.setenv("DUOMQ_ZOOKEEPER_SASL_FILE", login)     # the tools' and clients'
        cluster.add_broker("broker-a", 0, zookeeper_sasl_file=login)
        cluster.create_topic("Plain", 1)
        with Producer(zookeeper=server.connect, cluster="Plain") as prod:
            assert prod.send(Message("Plain", b"x")).ok
        # a bad login file is a clear startup error
        bad = tmp_path / "bad.sasl"
        bad.write_text("no-colon\n")
        p = run_cli("broker", "--zookeeper", server.connect, "--cluster", "Plain", "--data-dir",
                    str(tmp_path / "bad"), "--set", "port=0", "--set", "ha_port=0",
                    "--set", f"zookeeper_sasl_file={bad}", check=False, timeout_s=60)
        assert p.returncode == 2 and "a ZooKeeper SASL login is 'user:password'" in p.stderr, \
            p.stderr[-2000:]
        assert os.path.exists(login)
    finally:
        cluster.stop_all()
