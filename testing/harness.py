"""Real broker processes for tests, drills and benchmarks: start, kill -9,
SIGSTOP, restart, and read their logs. Ports are chosen once per broker so a
restart comes back at the same address."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from kazoo.exceptions import NoNodeError

from duomq.coordinator import zk as zkutil
from duomq.coordinator.nodes import IsrNode, MasterNode, MemberNode, NodeError
from duomq.coordinator.paths import ZkPaths
from duomq.coordinator.topics import TopicAdmin
from duomq.dev.brokers import (  # noqa: F401
    drop_page_cache,
    has_role,
    log_tail,
    wait_for,
    wait_registered,
    wait_slaves_hold,
)
from duomq.dev.ports import free_ports

# delay levels of 10 ms steps (RocketMQ's 18 levels, from 1 s to 2 h): a
# message sent back for a retry is seen again in 10 ms, not RocketMQ's 10 s
SHORT_DELAY_MS = [10 * i for i in range(1, 19)]
SHORT_DELAYS = {"message_delay_level": " ".join(f"{ms}ms" for ms in SHORT_DELAY_MS)}


def run_cli(*args: str, env: dict | None = None, check: bool = True,
            timeout_s: float = 120) -> subprocess.CompletedProcess:
    """``duomq ARGS`` as a user runs it; ``check``: exit 0 or fail with what it said."""
    p = subprocess.run([sys.executable, "-m", "duomq", *args], capture_output=True, text=True,
                       env={**os.environ, **(env or {})}, timeout=timeout_s)
    assert not check or p.returncode == 0, p.stdout + p.stderr
    return p


def read_node(zookeeper: str, path: str) -> dict:
    """A JSON node's content, as raw as it is stored, from a short-lived
    session ({} when absent): for tests that look at what was written."""
    zk = zkutil.connect(zookeeper)
    try:
        raw = zk.get(path)[0]
    except NoNodeError:
        return {}
    finally:
        zkutil.close(zk)
    return json.loads(raw) if raw else {}


def read_typed(zookeeper: str, path: str, parse):
    """A node parsed by ``parse`` (a node type's ``from_bytes``), from a
    short-lived session; None when absent or unreadable."""
    zk = zkutil.connect(zookeeper)
    try:
        return parse(zk.get(path)[0])
    except (NoNodeError, NodeError):
        return None
    finally:
        zkutil.close(zk)


def member_node(zookeeper: str, cluster: str, group: str, broker_id: int) -> MemberNode | None:
    """A broker's member node (None when it has none)."""
    return read_typed(zookeeper, ZkPaths(cluster).member(group, broker_id),
                      lambda raw: MemberNode.from_bytes(raw, broker_id))


def isr_members(zookeeper: str, cluster: str, group: str = "broker-a") -> set[int]:
    """The group's in-sync set as ZooKeeper holds it (empty when unpublished)."""
    isr = read_typed(zookeeper, ZkPaths(cluster).isr(group), IsrNode.from_bytes)
    return set(isr.members) if isr is not None else set()


def master_info(zookeeper: str, cluster: str, group: str = "broker-a") -> MasterNode | None:
    """The group's master node (None when there is none)."""
    return read_typed(zookeeper, ZkPaths(cluster).master(group), MasterNode.from_bytes)


def master_id(zookeeper: str, cluster: str, group: str = "broker-a") -> int | None:
    """The broker id holding the group's master node (None when there is none)."""
    node = master_info(zookeeper, cluster, group)
    return node.broker_id if node is not None else None


class BrokerProcess:
    def __init__(self, zookeeper: str, cluster: str, group: str, broker_id: int, data_dir: str,
                 env: dict | None = None, **settings):
        self.zookeeper = zookeeper
        self.cluster = cluster
        self.group = group
        self.broker_id = broker_id
        self.data_dir = data_dir
        spare = free_ports(3)        # distinct: the broker refuses two settings on one port
        given = [settings.pop(k, None) for k in ("port", "ha_port", "metrics_port")]
        self.port, self.ha_port, self.metrics_port = (g or p for g, p in zip(given, spare, strict=True))
        self._picked = not any(given)    # every port ours: another pick if one is taken
        self.settings = settings
        self.env = env or {}          # extra environment (fault injection)
        self.proc: subprocess.Popen | None = None
        os.makedirs(data_dir, exist_ok=True)
        self.log_path = os.path.join(data_dir, "broker.log")

    @property
    def address(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    def argv(self) -> list[str]:
        args = [sys.executable, "-m", "duomq", "broker", "--zookeeper", self.zookeeper,
                "--cluster", self.cluster, "--group", self.group, "--broker-id",
                str(self.broker_id), "--port", str(self.port), "--set", f"ha_port={self.ha_port}",
                "--set", f"metrics_port={self.metrics_port}",
                "--data-dir", os.path.join(self.data_dir, "store")]
        for k, v in self.settings.items():
            args += ["--set", f"{k}={v}"]
        return args

    def start(self, wait: bool = True, timeout_s: float = 30) -> BrokerProcess:
        for attempt in range(3):
            mark = os.path.getsize(self.log_path) if os.path.exists(self.log_path) else 0
            self._spawn()
            if not wait:
                return self
            try:
                self.wait_registered(timeout_s)
                return self
            except RuntimeError:
                # a port picked free was bound by another process before this
                # broker bound it: once more on other ports, when they are ours
                if not (self._picked and attempt < 2 and self._port_taken(mark)):
                    raise
                self.port, self.ha_port, self.metrics_port = free_ports(3)
        return self

    def _port_taken(self, since: int) -> bool:
        with open(self.log_path, "rb") as f:
            f.seek(since)
            return b"cannot listen" in f.read() and not self.alive()

    def _spawn(self) -> None:
        logf = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.argv(), stdout=logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env={**os.environ, **self.env})
        logf.close()

    def wait_registered(self, timeout_s: float = 30) -> None:
        if self.proc is None:
            raise RuntimeError(f"broker {self.group}/{self.broker_id} was never started")
        wait_registered(self.zookeeper, self.cluster, self.group, self.broker_id, self.proc.pid,
                        self.alive, self.log_path, timeout_s)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            if sig in (signal.SIGKILL, signal.SIGTERM):
                self.proc.wait(30)

    def suspend(self) -> None:
        self.kill(signal.SIGSTOP)

    def resume(self) -> None:
        self.kill(signal.SIGCONT)

    def stop(self, timeout_s: float = 20) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def restart(self, wait: bool = True) -> BrokerProcess:
        self.stop()
        return self.start(wait)

    def log_tail(self, lines: int = 80) -> str:
        return log_tail(self.log_path, lines)


class LocalCluster:
    """Brokers of one cluster on one ZooKeeper (a test's chroot or the dev one)."""

    def __init__(self, zookeeper: str, cluster: str, base_dir: str):
        self.zookeeper = zookeeper
        self.cluster = cluster
        self.base_dir = base_dir
        self.brokers: list[BrokerProcess] = []

    def add_broker(self, group: str = "broker-a", broker_id: int = 0, start: bool = True,
                   **settings) -> BrokerProcess:
        b = BrokerProcess(self.zookeeper, self.cluster, group, broker_id,
                          os.path.join(self.base_dir, f"{group}-{broker_id}"), **settings)
        self.brokers.append(b)
        if start:
            b.start()
        return b

    def create_topic(self, name: str, queues: int = 4, groups: list[str] | None = None,
                     wait: bool = True) -> None:
        zk = zkutil.connect(self.zookeeper, cluster=self.cluster)
        try:
            cfg = TopicAdmin(zk, self.cluster).create(name, queues, groups)
            if wait:  # until every hosting master has published its route
                paths = ZkPaths(self.cluster)
                deadline = time.monotonic() + 15
                while not all(zk.exists(paths.route(name, g)) for g in cfg.queues):
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"routes of {name} not published")
                    time.sleep(0.02)
        finally:
            zkutil.close(zk)

    def stop_all(self) -> None:
        """Every broker asked to stop at once, then each waited for (a stop
        past its timeout killed): a pair stops in the time of its slower
        broker, not of both."""
        for b in self.brokers:
            if b.proc is not None and b.alive():
                b.proc.send_signal(signal.SIGCONT)
                b.proc.terminate()
        for b in self.brokers:
            b.stop()

    def logs(self) -> str:
        return "\n".join(f"===== {b.group}/{b.broker_id} ({b.log_path})\n{b.log_tail()}"
                         for b in self.brokers)
