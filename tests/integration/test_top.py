"""``duomq top`` as a person sees it: run in tmux beside a live master and
slave with traffic, the screen read with ``capture-pane``; the master killed,
the screen shows the slave taking over at the next epoch."""

import os
import shlex
import shutil
import subprocess
import sys
import threading
import time

import pytest

from duomq.client import Message, Producer, PullConsumer
from duomq.common.message import MessageQueue
from duomq.testing.harness import wait_for

pytestmark = pytest.mark.integration


class Tmux:
    """A tmux server of its own (``-L``), killed afterwards."""

    def __init__(self, name: str):
        if shutil.which("tmux") is None:
            raise RuntimeError("tmux is not installed (make install installs it)")
        self.socket = f"duomq-test-{os.getpid()}-{name}"
        self.name = name

    def tmux(self, *args) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], check=True,
                              capture_output=True, text=True).stdout

    def start(self, command: list[str], width: int = 180, height: int = 50) -> None:
        self.tmux("new-session", "-d", "-s", self.name, "-x", str(width), "-y", str(height),
                  " ".join(shlex.quote(c) for c in command))

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.name)

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)


def row(screen: str, *words: str) -> str | None:
    """The first line of the screen holding every word."""
    return next((line for line in screen.splitlines() if all(w in line for w in words)), None)


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("│").split("│")]


def broker(screen: str, broker_id: int, role: str | None = None) -> list[str] | None:
    """The cells of broker-a/``broker_id``'s row (with that role)."""
    for line in screen.splitlines():
        c = cells(line)
        if len(c) > 3 and c[0] == "broker-a" and c[1] == str(broker_id) \
                and (role is None or c[2] == role):
            return c
    return None


def test_top_shows_roles_traffic_lag_and_a_failover(local_cluster):
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    master = local_cluster.add_broker("broker-a", 0)
    local_cluster.add_broker("broker-a", 1)
    local_cluster.create_topic("Orders", 4)
    local_cluster.create_topic("Clicks", 2)
    stop = threading.Event()

    def load():
        with Producer(zookeeper=zk, cluster=cl) as p:
            while not stop.is_set():
                try:
                    p.send_batch([Message("Orders", b"o" * 100)] * 20)
                    p.send_batch([Message("Clicks", b"c" * 100)] * 2)
                except Exception:
                    pass                # through the failover
                time.sleep(0.02)

    sender = threading.Thread(target=load, daemon=True)
    sender.start()
    time.sleep(1)
    with PullConsumer("billing", zookeeper=zk, cluster=cl) as c:
        c.commit({MessageQueue("Orders", "broker-a", 0): 0})
    tmux = Tmux("top")
    env = ["env", f"PYTHONPATH={os.environ.get('PYTHONPATH', '')}", "COLUMNS=180"]
    tmux.start([*env, sys.executable, "-m", "duomq", "top", "--zookeeper", zk, "--cluster", cl])
    try:
        def shown():
            s = tmux.screen()
            m = broker(s, 0, "MASTER")
            return s if m and m[5].endswith("/s") and broker(s, 1, "SLAVE") \
                and row(s, "Orders", "billing") else None
        wait_for(shown, 30, "duomq top to show both brokers, traffic and the group's lag")
        screen = tmux.screen()
        assert "duomq top" in screen and f"cluster {cl}" in screen
        m = broker(screen, 0, "MASTER")
        assert m[3] == "1"                                  # epoch
        assert int(m[5].removesuffix("/s").replace(",", "")) > 0   # messages in per second
        assert m[7] == "1"                                  # one slave in sync
        assert m[13] == "1 open"                            # its replication connection
        s = broker(screen, 1, "SLAVE")
        assert s[8].endswith(("B", "KiB", "MiB"))           # its replication lag, in bytes
        assert s[13] == "0 lost"                            # its link never dropped
        orders = cells(row(screen, "│ Orders", "/s"))
        assert int(orders[1].removesuffix("/s").replace(",", "")) > 0
        lag = cells(row(screen, "Orders", "billing"))
        assert int(lag[2].replace(",", "")) > 0             # billing is behind on Orders

        master.kill()                   # kill -9: the slave takes over at epoch 2
        wait_for(lambda: broker(tmux.screen(), 1, "MASTER"), 60,
                 "duomq top to show broker 1 as master")
        screen = tmux.screen()
        assert int(broker(screen, 1, "MASTER")[3]) >= 2          # at a new epoch
        assert broker(screen, 0) is None                         # gone from ZooKeeper
    finally:
        try:
            print(tmux.screen())        # shown when the test failed
        except subprocess.CalledProcessError:
            pass
        tmux.kill()
        stop.set()
        sender.join(30)
