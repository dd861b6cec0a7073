"""Fault drivers: how a drill breaks a broker and heals it again.

``LocalDriver`` works on brokers running on this host (a ``duomq dev``
cluster, found through its data dir): signals for kills and pauses; network
faults with iptables rules on 127.0.0.1 (as root, ``netfilter.Netfilter``),
every rule tagged with the run's comment and removed on heal and at exit.

``ExternalDriver`` injects nothing: the user (or a chaos tool, ``kubectl
delete pod``) breaks the cluster, and the drill watches ZooKeeper to time it.

``container_driver.ContainerDriver`` breaks podman containers of this host.
The local and container drivers have the same methods (kill, start, pause,
resume, cut_port, isolate_from_zookeeper, kill_zookeeper, start_zookeeper,
store_volume, fill_disk, free_disk, heal_network, close): the scenarios
call them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
from dataclasses import dataclass

import psutil

from duomq.common.errors import ConfigError
from duomq.common.role import Role
from duomq.drill.netfilter import Netfilter, NetfilterError, zookeeper_ports
from duomq.drill.resets import Resetter, stop_all


class DrillError(ConfigError):
    """The cluster or this host cannot run the scenario asked for."""


@dataclass(frozen=True)
class Broker:
    """A broker as the drill sees it (its member node)."""
    group: str
    broker_id: int
    role: Role
    pid: int | None
    address: str
    ha_address: str

    @property
    def name(self) -> str:
        return f"{self.group}/{self.broker_id}"

    @property
    def port(self) -> int:
        return int(self.address.rsplit(":", 1)[1])

    @property
    def ha_port(self) -> int:
        return int(self.ha_address.rsplit(":", 1)[1])


class LocalDriver:
    name = "local"

    def __init__(self, data_dir: str, zookeeper: str, tag: str):
        from duomq.common.endpoint import read_dev_state
        self.data_dir = data_dir
        self.state = read_dev_state(data_dir)
        if self.state is None:
            raise DrillError(f"the local driver needs a dev cluster: none in {data_dir} "
                             f"(start one with 'duomq dev up', or use --driver external)")
        self.zookeeper = zookeeper
        self.tag = f"duomq-drill-{tag}"
        self.net = Netfilter(self.tag)
        self._zk_killed = 0
        self._zk_paused = False
        self._fills: list[str] = []
        self._resets: list[Resetter] = []
        # where each broker's log stood when the drill began: its audit reads
        # what was written since (a dev cluster brought up again in the same
        # directory appends to the logs of its earlier runs, whose cuts are
        # not this drill's)
        self._log_from: dict[str, int] = {}
        for b in self.state.get("brokers", []):
            if b.get("log"):
                with contextlib.suppress(OSError):
                    self._log_from[b["log"]] = os.path.getsize(b["log"])

    # ------------------------------------------------------------ processes
    def kill(self, b: Broker) -> str:
        from duomq.dev.cluster import kill_broker
        return f"kill -9 {b.name} (pid {kill_broker(self.data_dir, b.name, 9)['pid']})"

    def start(self, b: Broker) -> str:
        from duomq.dev.cluster import start_again
        started = start_again(self.data_dir, b.name)
        return f"started {b.name} again (pid {started['pid']})"

    def pause(self, b: Broker) -> str:
        from duomq.dev.cluster import kill_broker
        kill_broker(self.data_dir, b.name, signal.SIGSTOP)
        return f"SIGSTOP {b.name}"

    def resume(self, b: Broker) -> str:
        from duomq.dev.cluster import kill_broker
        kill_broker(self.data_dir, b.name, signal.SIGCONT)
        return f"SIGCONT {b.name}"

    def _process(self, b: Broker) -> psutil.Process:
        if not b.pid:
            raise DrillError(f"{b.name} publishes no pid: not a local broker")
        try:
            return psutil.Process(b.pid)
        except psutil.Error:
            raise DrillError(f"{b.name} (pid {b.pid}) does not run on this host") from None

    # ------------------------------------------------------------ ZooKeeper
    def kill_zookeeper(self) -> str:
        """kill -9 the leader of the dev cluster's ZooKeeper ensemble."""
        from duomq.dev.cluster import kill_zookeeper
        killed = kill_zookeeper(self.data_dir, "leader")
        self._zk_killed = killed["zookeeper"]
        return f"kill -9 ZooKeeper server {killed['zookeeper']} ({killed['mode']})"

    def start_zookeeper(self) -> str:
        from duomq.dev.cluster import start_zookeeper
        started = start_zookeeper(self.data_dir, self._zk_killed)
        return f"started ZooKeeper server {started['zookeeper']} again ({started['mode']})"

    def zookeeper_servers(self) -> int:
        return len(self.state.get("zookeeper_servers", [])) if self.state else 1

    def broker_logs(self, group: str, _brokers=()) -> list[tuple[str, str]]:
        """(group/id, log text) of every dev broker of ``group``."""
        from duomq.common.endpoint import read_dev_state
        out = []
        for b in (read_dev_state(self.data_dir) or {}).get("brokers", []):
            if b.get("group") == group and b.get("log"):
                with contextlib.suppress(OSError), open(b["log"], errors="replace") as f:
                    start = self._log_from.get(b["log"], 0)
                    if os.path.getsize(b["log"]) >= start:   # else a new file: all of it
                        f.seek(start)
                    out.append((f"{group}/{b['id']}", f.read()))
        return out

    def zookeeper_pausable(self) -> None:
        """Raises DrillError unless the dev cluster's ZooKeeper servers are
        processes of this host (not a shared or external ensemble)."""
        from duomq.common.endpoint import read_dev_state
        from duomq.dev.cluster import zookeeper_pids
        if not zookeeper_pids(read_dev_state(self.data_dir)):
            raise DrillError("zookeeper-outage needs the dev cluster's own ZooKeeper (started "
                             "by 'duomq dev up' without --zookeeper): this one is not a "
                             "process of this host")

    def pause_zookeeper(self) -> str:
        """SIGSTOP every ZooKeeper server of the dev cluster: an outage that
        keeps their connections open (the worst kind: nobody is told)."""
        from duomq.dev.cluster import signal_zookeepers
        n = signal_zookeepers(self.data_dir, signal.SIGSTOP)
        self._zk_paused = True
        return f"SIGSTOP every ZooKeeper server ({n})"

    def resume_zookeeper(self) -> str:
        from duomq.dev.cluster import signal_zookeepers
        if not self._zk_paused:
            return "no ZooKeeper server paused"
        self._zk_paused = False
        return f"SIGCONT every ZooKeeper server ({signal_zookeepers(self.data_dir, signal.SIGCONT)})"

    # ------------------------------------------------------------ network
    def cut_port(self, _b: Broker, port: int, what: str) -> str:
        """Drop every packet to and from a TCP port on this host."""
        self._net(self.net.cut_port, port)
        return f"cut {what} (port {port})"

    def isolate_from_zookeeper(self, b: Broker) -> str:
        zk_ports = zookeeper_ports(self.zookeeper)          # every server of an ensemble
        self._net(self.net.isolate, self._process(b).pid, zk_ports, str(b.broker_id))
        return f"cut {b.name} from ZooKeeper (port{'s' if len(zk_ports) > 1 else ''} " \
               f"{', '.join(map(str, zk_ports))})"

    def heal_network(self) -> str:
        """Remove every rule and cgroup this driver set up."""
        return f"removed {self.net.heal()} iptables rule(s)"

    def reset_connections(self, _b: Broker, port: int, what: str) -> str:
        """Reset every connection to ``port`` on this host, now and every
        ``resets.RESET_EVERY_S`` until ``stop_resets`` (``drill.resets``)."""
        r = Resetter(port)
        self._net(r.start)
        self._resets.append(r)
        return f"reset {what} (port {port}: {r.connections} connection(s)), again every " \
               f"{r.every_s:g} s"

    def stop_resets(self) -> str:
        return stop_all(self._resets)

    @staticmethod
    def _net(fault, *args) -> None:
        try:
            fault(*args)
        except NetfilterError as exc:
            raise DrillError(str(exc)) from None

    # ------------------------------------------------------------ disk
    def store_volume(self, b: Broker) -> str:
        """The mount point of ``b``'s own store volume (``dev up --store-size``)."""
        for entry in (self.state or {}).get("brokers", []):
            if (entry["group"], entry["id"]) == (b.group, b.broker_id) and entry.get("volume"):
                point = entry["volume"]["mount"]
                if os.path.ismount(point):
                    return point
        raise DrillError(f"{b.name} has no store volume of its own, and this drill never fills "
                         f"a shared disk: start the dev cluster with 'duomq dev up "
                         f"--store-size 256M'")

    def fill_disk(self, b: Broker) -> str:
        """Fill ``b``'s store volume to the last block (a file of the drill's)."""
        point = self.store_volume(b)
        path = os.path.join(point, f".{self.tag}-fill")
        st = os.statvfs(point)
        free = st.f_bfree * st.f_frsize
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._fills.append(path)
        try:
            with contextlib.suppress(OSError):       # all but the last MiB in one call
                os.posix_fallocate(fd, 0, max(0, free - (1 << 20)))
            block = bytes(st.f_frsize)
            while True:                              # then block by block until ENOSPC
                try:
                    os.write(fd, block)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
            os.fsync(fd)
        finally:
            os.close(fd)
        return f"filled {b.name}'s store volume ({free / 2**20:.0f} MiB were free)"

    def free_disk(self) -> str:
        n = len(self._fills)
        while self._fills:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._fills.pop())
        return f"removed {n} fill file(s)"

    def close(self) -> None:
        self.stop_resets()
        self.resume_zookeeper()
        self.heal_network()
        self.free_disk()


class ExternalDriver:
    """Faults come from outside; the drill only watches and times them."""
    name = "external"

    def close(self) -> None:
        pass


def wait_until(cond, timeout_s: float, step_s: float = 0.05):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(step_s)
    return None
