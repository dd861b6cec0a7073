"""A secured dev cluster's ZooKeeper speaks only TLS (issue 40): its one
client port is the secure one, a plaintext session is refused, the brokers,
the CLI and a user's client reach it with the CA their credentials carry,
and credentials without it fail saying so. Real ZooKeeper (Netty, PEM
keys from ``duomq auth init --zookeeper-tls``), real brokers."""

import json
import os
import pathlib

import pytest
from kazoo.client import KazooClient

from duomq.auth.credentials import Credentials
from duomq.client import Producer
from duomq.common.errors import ServiceNotAvailableError
from duomq.coordinator.zk import four_letter
from duomq.testing.harness import run_cli

pytestmark = pytest.mark.integration


def test_a_secured_dev_clusters_zookeeper_speaks_only_tls(tmp_path):
    env = {"DUOMQ_DEV_DIR": str(tmp_path / "dev")}
    up = json.loads(run_cli("dev", "up", "--auth", "--slaves", "1", "--cluster",
                            f"Tls{os.getpid()}", "--json", env=env).stdout)
    try:
        zk = up["zookeeper"]
        host, port = zk.split(":")
        cfg = (tmp_path / "dev" / "zookeeper" / "zoo.cfg").read_text()
        assert f"secureClientPort={port}" in cfg and "clientPort=" not in cfg.replace(
            "secureClientPort=", "")
        admin = Credentials.load(up["credentials"]["admin"])
        ca = admin.zookeeper["tls_ca"]
        assert "Mode: standalone" in four_letter(host, int(port), tls_ca=ca)
        # plaintext: no session, and no answer to a four-letter word
        plain = KazooClient(hosts=zk)
        with pytest.raises(Exception, match="(?i)time-?out|timed out"):
            plain.start(timeout=3)
        plain.stop()
        plain.close()
        try:
            answer = four_letter(host, int(port), timeout=2)
        except OSError:
            answer = ""
        assert "Mode:" not in answer
        # the brokers are up (they reached it), the CLI and a user's client too
        assert [b["role"] for b in up["brokers"]] == ["MASTER", "SLAVE"]
        run_cli("topic", "create", "T", "--queues", "1", env=env)
        user = str(tmp_path / "u.json")
        run_cli("auth", "user", "add", "u", "--allow", "Topic:T:Pub", "--out", user, env=env)
        assert Credentials.load(user).zookeeper["tls_ca"] == ca
        p = run_cli("produce", "T", "a", "--credentials", user, env=env)
        assert "SEND_OK 1" in p.stdout
        # credentials without the CA: refused, with the reason
        doc = json.loads(pathlib.Path(user).read_text())
        del doc["zookeeper"]["tls_ca"]
        bare = tmp_path / "bare.json"
        bare.write_text(json.dumps(doc))
        with pytest.raises(ServiceNotAvailableError, match="speaks only TLS"):
            Producer(zookeeper=zk, cluster=up["cluster"], credentials=str(bare))
    finally:
        run_cli("dev", "down", env=env)
