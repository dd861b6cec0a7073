"""The ``container`` fault driver: brokers and ZooKeeper servers running as
podman containers on this host (the images of ``make image``, as the pods
of deploy/k8s run them), found by the address they publish: a container
whose name, host name or IP on one of its networks is that address's host.

Kills are ``podman kill --signal KILL`` and ``podman start`` (the pod
restarted with its volumes); pauses ``podman pause`` / ``unpause`` (the
cgroup freezer). Network faults are iptables rules inside the target
container's own network namespace (``nsenter --net``), tagged with the run
and removed on heal and at exit: a partition cuts that one container off
ZooKeeper's port, its replication port or its client port, and nothing on
the host. The drill itself must reach the brokers and ZooKeeper at the
addresses they publish (brokers advertising their container IPs, or the
drill running where the pods' names resolve). Root only.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time

from duomq.coordinator.zk import server_mode
from duomq.coordinator.zk_login import env_zk_access
from duomq.drill.faults import Broker, DrillError
from duomq.drill.netfilter import NetfilterError
from duomq.drill.resets import Resetter, stop_all

ZK_BACK_S = 60.0     # a restarted ZooKeeper server is back in the quorum within this


def _podman(*args: str, check: bool = True, timeout_s: float = 60) -> str:
    p = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout_s)
    if check and p.returncode != 0:
        raise DrillError(f"podman {' '.join(args)}: {(p.stderr or p.stdout).strip()}")
    return p.stdout


FREEZE_TRIES = 3     # ``podman pause`` of a container whose cgroup would not freeze


def _pause(name: str) -> None:
    """``podman pause``: the cgroup freezer gives up ("unable to freeze")
    while a task of the container sits in the kernel (an fsync on a loaded
    host) and leaves the container running; tried again then."""
    for attempt in range(1, FREEZE_TRIES + 1):
        try:
            _podman("pause", name)
            return
        except DrillError as exc:
            if "unable to freeze" not in str(exc) or attempt == FREEZE_TRIES:
                raise
            time.sleep(0.2)


def _host(address: str) -> str:
    """``tcp://host:port`` or ``host:port`` -> host."""
    return address.split("://", 1)[-1].rsplit(":", 1)[0]


class ContainerDriver:
    name = "container"

    def __init__(self, zookeeper: str, tag: str):
        if shutil.which("podman") is None:
            raise DrillError("the container driver needs podman on this host")
        self.zookeeper = zookeeper
        # an ensemble that speaks only TLS is asked with the CA of the
        # credentials the drill runs with
        self.tls_ca = (env_zk_access() or {}).get("tls_ca")
        self.tag = f"duomq-drill-{tag}"
        self._rules: list[tuple[str, list[str]]] = []     # (container, iptables rule)
        self._zk_killed = ""
        self._zk_killed_at: tuple[str, int] = ("", 0)
        self._zk_paused: list[str] = []
        self._names: dict[str, str] = {}                  # address -> container
        self._resets: list[Resetter] = []

    # ------------------------------------------------------------ finding containers
    def _containers(self) -> list[dict]:
        ids = _podman("ps", "-a", "-q").split()
        return json.loads(_podman("inspect", *ids)) if ids else []

    def container_at(self, address: str) -> str:
        """The container that publishes ``address`` (its name; remembered,
        since a stopped container shows no IP)."""
        if address in self._names:
            return self._names[address]
        host = _host(address)
        for c in self._containers():
            names = {c["Name"].lstrip("/"), c["Config"].get("Hostname", "")}
            ips = {n.get("IPAddress") for n in
                   (c.get("NetworkSettings", {}).get("Networks") or {}).values()}
            if host in names or host in ips or host.split(".")[0] in names:
                self._names[address] = c["Name"].lstrip("/")
                return self._names[address]
        raise DrillError(f"no podman container on this host publishes {address}: the "
                         f"container driver breaks containers of this host only")

    def _of(self, b: Broker) -> str:
        return self.container_at(b.address)

    # ------------------------------------------------------------ processes
    def kill(self, b: Broker) -> str:
        name = self._of(b)
        _podman("kill", "--signal", "KILL", name)
        _podman("wait", name, check=False, timeout_s=30)
        return f"podman kill -s KILL {name} ({b.name})"

    def start(self, b: Broker) -> str:
        name = self._of(b)
        _podman("start", name)
        return f"podman start {name} ({b.name})"

    def pause(self, b: Broker) -> str:
        name = self._of(b)
        _pause(name)
        return f"podman pause {name} ({b.name})"

    def resume(self, b: Broker) -> str:
        name = self._of(b)
        _podman("unpause", name)
        return f"podman unpause {name} ({b.name})"

    # ------------------------------------------------------------ ZooKeeper
    def _zk_servers(self) -> list[tuple[str, int]]:
        hosts = self.zookeeper.split("/")[0].split(",")
        return [(h.rsplit(":", 1)[0], int(h.rsplit(":", 1)[1])) for h in hosts]

    def zookeeper_servers(self) -> int:
        return len(self._zk_servers())

    def kill_zookeeper(self) -> str:
        """kill -9 the container of the ensemble's leader."""
        leader = next(((h, p) for h, p in self._zk_servers()
                       if server_mode(h, p, self.tls_ca) == "leader"), None)
        if leader is None:
            raise DrillError(f"no ZooKeeper server of {self.zookeeper} says it leads")
        name = self.container_at(f"{leader[0]}:{leader[1]}")
        _podman("kill", "--signal", "KILL", name)
        self._zk_killed, self._zk_killed_at = name, leader
        return f"podman kill -s KILL {name} (ZooKeeper leader {leader[0]}:{leader[1]})"

    def start_zookeeper(self, timeout_s: float = ZK_BACK_S) -> str:
        """``podman start`` of the killed server's container; done once it
        serves in the quorum again (a container that starts but whose server
        never comes back leaves the ensemble a server short for the rounds
        after: that fails the heal)."""
        _podman("start", self._zk_killed)
        host, port = self._zk_killed_at
        deadline = time.monotonic() + timeout_s
        while (mode := server_mode(host, port, self.tls_ca)) not in ("leader", "follower"):
            if time.monotonic() > deadline:
                logs = subprocess.run(["podman", "logs", "--tail", "20", self._zk_killed],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True, timeout=60).stdout
                raise DrillError(f"ZooKeeper server {host}:{port} ({self._zk_killed}) started "
                                 f"again but not back in the quorum after {timeout_s:g} s; its "
                                 f"log ends:\n{logs}")
            time.sleep(0.2)
        return f"podman start {self._zk_killed} (back as {mode})"

    def broker_logs(self, group: str, brokers: list[Broker]) -> list[tuple[str, str]]:
        """(group/id, ``podman logs``) of the brokers' containers."""
        out = []
        for b in brokers:
            with contextlib.suppress(DrillError):
                out.append((b.name, _podman("logs", self.container_at(b.address), check=False,
                                            timeout_s=60)))
        return out

    def zookeeper_pausable(self) -> None:
        for h, p in self._zk_servers():
            self.container_at(f"{h}:{p}")        # raises DrillError: not a container here

    def pause_zookeeper(self) -> str:
        """``podman pause`` every ZooKeeper server's container."""
        names = [self.container_at(f"{h}:{p}") for h, p in self._zk_servers()]
        for name in names:
            _pause(name)
            self._zk_paused.append(name)
        return f"podman pause {' '.join(names)} (every ZooKeeper server)"

    def resume_zookeeper(self) -> str:
        names = list(self._zk_paused)
        while self._zk_paused:
            _podman("unpause", self._zk_paused.pop(), check=False)
        return f"podman unpause {' '.join(names)}"

    # ------------------------------------------------------------ network
    def cut_port(self, b: Broker, port: int, what: str) -> str:
        """Drop every packet to and from ``port`` in ``b``'s container."""
        name = self._of(b)
        for chain, direction in (("INPUT", "--dport"), ("INPUT", "--sport"),
                                 ("OUTPUT", "--dport"), ("OUTPUT", "--sport")):
            self._rule(name, chain, "-p", "tcp", direction, str(port))
        return f"cut {what} (port {port}) inside {name}"

    def isolate_from_zookeeper(self, b: Broker) -> str:
        name = self._of(b)
        ports = sorted({p for _h, p in self._zk_servers()})
        for port in ports:
            self._rule(name, "OUTPUT", "-p", "tcp", "--dport", str(port))
            self._rule(name, "INPUT", "-p", "tcp", "--sport", str(port))
        return f"cut {name} ({b.name}) from ZooKeeper (port {', '.join(map(str, ports))})"

    def _netns(self, name: str) -> list[str]:
        pid = _podman("inspect", "--format", "{{.State.Pid}}", name).strip()
        if not pid or pid == "0":
            raise DrillError(f"container {name} is not running")
        return ["nsenter", "--target", pid, "--net"]

    def _rule(self, name: str, chain: str, *spec: str) -> None:
        if shutil.which("iptables") is None or shutil.which("nsenter") is None:
            raise DrillError("network faults in containers need root, iptables and nsenter")
        rule = [chain, *spec, "-m", "comment", "--comment", self.tag, "-j", "DROP"]
        p = subprocess.run([*self._netns(name), "iptables", "-I", *rule], capture_output=True,
                           text=True)
        if p.returncode != 0:
            raise DrillError(f"iptables in {name}'s network namespace: {p.stderr.strip()}")
        self._rules.append((name, rule))

    def heal_network(self) -> str:
        n = len(self._rules)
        while self._rules:
            name, rule = self._rules.pop()
            with contextlib.suppress(DrillError):      # a restarted container: a new netns
                subprocess.run([*self._netns(name), "iptables", "-D", *rule],
                               capture_output=True, check=False)
        return f"removed {n} iptables rule(s)"

    def reset_connections(self, b: Broker, port: int, what: str) -> str:
        """Reset every connection to ``port`` in ``b``'s container, now and
        every ``resets.RESET_EVERY_S`` until ``stop_resets``."""
        name = self._of(b)
        if shutil.which("nsenter") is None or shutil.which("ss") is None:
            raise DrillError("connection resets in containers need root, nsenter and ss")
        r = Resetter(port, self._netns(name))
        try:
            r.start()
        except NetfilterError as exc:
            raise DrillError(str(exc)) from None
        self._resets.append(r)
        return f"reset {what} (port {port} inside {name}: {r.connections} connection(s)), " \
               f"again every {r.every_s:g} s"

    def stop_resets(self) -> str:
        return stop_all(self._resets)

    # ------------------------------------------------------------ disk
    def store_volume(self, b: Broker) -> str:
        raise DrillError("disk-full-master runs with the local driver only: a container's "
                         "data volume is a directory of this host's disk, which a drill "
                         "never fills")

    def fill_disk(self, b: Broker) -> str:
        return self.store_volume(b)

    def free_disk(self) -> str:
        return "nothing to free"

    def close(self) -> None:
        self.stop_resets()
        self.resume_zookeeper()
        self.heal_network()

