"""``duomq dev up --proxy``: a proxy beside the dev cluster, named by ``dev
status --json`` and exported by ``dev env``; an application written for
RocketMQ 5 (the official client) runs against it by its endpoint alone,
and ``dev down`` stops it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from duomq.testing.harness import run_cli

APP = textwrap.dedent("""
    import os
    from rocketmq.v5.client import ClientConfiguration, Credentials
    from rocketmq.v5.model import Message
    from rocketmq.v5.producer import Producer
    p = Producer(ClientConfiguration(os.environ["DUOMQ_PROXY"], Credentials("", "")), ("Orders",))
    p.startup()
    for i in range(3):
        m = Message()
        m.topic, m.body, m.tag = "Orders", b"order %d" % i, "created"
        print(p.send(m).message_id, flush=True)
    p.shutdown()
""")


def test_dev_up_proxy_serves_an_official_client_by_its_endpoint(zk_server, tmp_path,
                                                                monkeypatch):
    for name in ("DUOMQ_ZOOKEEPER", "DUOMQ_CLUSTER", "DUOMQ_PROXY", "DUOMQ_CREDENTIALS"):
        monkeypatch.delenv(name, raising=False)
    env = {"DUOMQ_DEV_DIR": str(tmp_path / "dev")}
    up = json.loads(run_cli("dev", "up", "--proxy", "--zookeeper", zk_server.connect,
                            "--cluster", f"Proxy{os.getpid()}", "--json", env=env).stdout)
    try:
        proxy = up["proxy"]
        assert proxy["alive"] and proxy["address"].startswith("127.0.0.1:")
        exported = run_cli("dev", "env", env=env).stdout
        assert f"export DUOMQ_PROXY={proxy['address']}" in exported.splitlines()
        run_cli("topic", "create", "Orders", "--queues", "2", env=env)
        app = subprocess.run([sys.executable, "-c", APP], capture_output=True, text=True,
                             timeout=60, env={**os.environ, "DUOMQ_PROXY": proxy["address"]})
        assert app.returncode == 0, app.stderr[-2000:]
        ids = app.stdout.split()
        assert len(ids) == 3
        got = run_cli("consume", "Orders", "--group", "g", "--from", "first", "--count", "3",
                      "--json", env=env).stdout
        bodies = sorted(json.loads(line)["body"] for line in got.splitlines()
                        if line.startswith("{") and '"body"' in line)
        assert bodies == ["order 0", "order 1", "order 2"]
    finally:
        down = json.loads(run_cli("dev", "down", "--json", env=env).stdout)
    assert "proxy" in down["stopped"]
