"""Network faults on this host with iptables (as root): every rule tagged
with a comment and removed by ``heal``. The local drill driver and the
tests that cut links use it.

Cutting one process from ZooKeeper moves it into a cgroup of its own and
drops that group's packets to ZooKeeper's ports, plus its already open
ZooKeeper connections by their port pairs (see ../shared/RECIPES.md).
Dropping only ZooKeeper's *replies* to a process (``drop_zookeeper_replies``)
lets its requests through: ZooKeeper applies its writes and the process
never learns that it did.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess

import psutil

from duomq.common.errors import ConfigError

CGROUP_ROOT = "/sys/fs/cgroup/unified"


class NetfilterError(ConfigError):
    """This host cannot set the rule asked for."""


def zookeeper_ports(connect: str) -> list[int]:
    """The ports of every server of a ZooKeeper connect string."""
    hosts = connect.split("/")[0].split(",")
    return sorted({int(h.rsplit(":", 1)[1]) for h in hosts})


class Netfilter:
    def __init__(self, tag: str):
        self.tag = tag
        self._rules: list[list[str]] = []
        self._cgroups: list[tuple[str, int]] = []

    @staticmethod
    def available() -> bool:
        return os.geteuid() == 0 and shutil.which("iptables") is not None

    def need(self) -> None:
        if not self.available():
            raise NetfilterError("network faults need root and iptables on this host")

    def cut_port(self, port: int) -> None:
        """Drop every packet to and from a TCP port on this host."""
        self.need()
        for direction in ("--dport", "--sport"):
            self.drop("INPUT", "-p", "tcp", direction, str(port))

    def isolate(self, pid: int, ports: list[int], name: str) -> None:
        """Cut process ``pid`` from the TCP ports ``ports`` (new connections
        and the ones already open), both ways."""
        self.need()
        group = f"{self.tag}-{name}"
        path = os.path.join(CGROUP_ROOT, group)
        if not os.path.isdir(CGROUP_ROOT):
            raise NetfilterError(f"no cgroup v2 hierarchy at {CGROUP_ROOT}: cannot isolate one "
                                 f"process from ZooKeeper on this host")
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write(str(pid))
        self._cgroups.append((path, pid))
        for port in ports:
            self.drop("OUTPUT", "-m", "cgroup", "--path", group, "-p", "tcp", "--dport", str(port))
        for lport, rport in self._open(pid, ports):
            self.drop("INPUT", "-p", "tcp", "--sport", rport, "--dport", lport)
            self.drop("INPUT", "-p", "tcp", "--sport", lport, "--dport", rport)

    def drop_replies(self, pid: int, ports: list[int]) -> int:
        """Drop what the servers on ``ports`` send to process ``pid`` on its
        open connections (its requests still arrive); how many connections."""
        self.need()
        conns = self._open(pid, ports)
        for lport, rport in conns:
            self.drop("INPUT", "-p", "tcp", "--sport", rport, "--dport", lport)
        return len(conns)

    @staticmethod
    def _open(pid: int, ports: list[int]) -> list[tuple[str, str]]:
        try:
            conns = psutil.Process(pid).net_connections("tcp")
        except psutil.Error as exc:
            raise NetfilterError(f"pid {pid}: {exc}") from None
        return [(str(c.laddr.port), str(c.raddr.port)) for c in conns
                if c.raddr and c.raddr.port in ports]

    def drop(self, chain: str, *spec: str) -> None:
        rule = [chain, *spec, "-m", "comment", "--comment", self.tag, "-j", "DROP"]
        subprocess.run(["iptables", "-I", *rule], check=True, capture_output=True)
        self._rules.append(rule)

    def heal(self) -> int:
        """Remove every rule and cgroup set up here; how many rules there were."""
        n = len(self._rules)
        while self._rules:
            rule = self._rules.pop()
            subprocess.run(["iptables", "-D", *rule], capture_output=True, check=False)
        while self._cgroups:
            path, pid = self._cgroups.pop()
            with contextlib.suppress(OSError):
                with open(os.path.join(CGROUP_ROOT, "cgroup.procs"), "w") as f:
                    f.write(str(pid))
            with contextlib.suppress(OSError):
                os.rmdir(path)
        return n
