"""The ZooKeeper pods' probe commands asked of a real ZooKeeper server, and of
a closed port. (The brokers' and the Spark job's commands run in containers
of the built images: test_containers.py.)"""

import os
import subprocess

import pytest

from duomq.dev.ports import free_port
from duomq.testing.k8s import named, render

pytestmark = pytest.mark.integration


def zk_probe(container, which, port):
    command = container[which]["exec"]["command"]
    p = subprocess.run(command, env={**os.environ, "ZK_CLIENT_PORT": str(port)},
                       capture_output=True, text=True, timeout=10)
    return p.returncode


def test_zookeeper_probes_against_a_real_server(zk_server):
    zk = named(render("overlays/prod"), "StatefulSet", "zk")
    (container,) = zk["spec"]["template"]["spec"]["containers"]
    port = int(zk_server.connect.rsplit(":", 1)[1])
    assert zk_probe(container, "livenessProbe", port) == 0        # ruok: imok
    assert zk_probe(container, "readinessProbe", port) == 0       # srvr: Mode: standalone
    closed = free_port()
    assert zk_probe(container, "livenessProbe", closed) != 0
    assert zk_probe(container, "readinessProbe", closed) != 0
