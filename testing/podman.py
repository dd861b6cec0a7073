"""Containers for the tests that run the Kubernetes pods' commands: podman
(rootful), as ``make image`` builds the images, with a pod's security
settings carried over to ``podman run``.

On this kind of host podman 4.3 needs ``--runtime runc`` (crun cannot set
its rlimits) and explicit rlimits no higher than the host's: ``--ulimit
host`` asks for more open files than a process without CAP_SYS_RESOURCE may
have.
"""

from __future__ import annotations

import ipaddress
import json
import resource
import shutil
import subprocess
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

NPROC_MAX = 32768          # what conmon runs with here; runc cannot raise it


class PodmanError(RuntimeError):
    pass


def podman_bin() -> str:
    path = shutil.which("podman")
    if path is None:
        raise PodmanError("podman is not installed: `make image` installs it (Debian's podman)")
    return path


def run_flags() -> list[str]:
    """``podman run`` flags for this host: runc, and rlimits no higher than
    this process's own (containers may not raise them)."""
    soft, hard = (v if v != resource.RLIM_INFINITY else 1 << 20
                  for v in resource.getrlimit(resource.RLIMIT_NOFILE))
    nproc = min([NPROC_MAX, *(v for v in resource.getrlimit(resource.RLIMIT_NPROC)
                              if v != resource.RLIM_INFINITY)])
    return ["--runtime", "runc", "--ulimit", f"nofile={soft}:{hard}",
            "--ulimit", f"nproc={nproc}:{nproc}"]


def podman(*args: str, timeout_s: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run([podman_bin(), *args], capture_output=True, text=True, timeout=timeout_s)
    if check and p.returncode != 0:
        raise PodmanError(f"podman {' '.join(args[:3])} ...: exit {p.returncode}\n"
                          f"{p.stdout[-2000:]}{p.stderr[-2000:]}")
    return p


def image_exists(image: str) -> bool:
    return podman("image", "exists", image, check=False).returncode == 0


@dataclass
class PodSecurity:
    """What a pod's and its container's securityContext ask of the runtime."""
    user: str | None = None                # uid:gid
    read_only: bool = False
    drop_all: bool = False
    no_new_privileges: bool = False

    @classmethod
    def of(cls, pod_spec: dict, container: dict) -> PodSecurity:
        pod = pod_spec.get("securityContext") or {}
        c = container.get("securityContext") or {}
        uid, gid = c.get("runAsUser", pod.get("runAsUser")), c.get("runAsGroup", pod.get("runAsGroup"))
        return cls(user=f"{uid}:{gid if gid is not None else uid}" if uid is not None else None,
                   read_only=bool(c.get("readOnlyRootFilesystem")),
                   drop_all="ALL" in ((c.get("capabilities") or {}).get("drop") or []),
                   no_new_privileges=c.get("allowPrivilegeEscalation") is False)

    def flags(self) -> list[str]:
        out = []
        if self.user:
            out += ["--user", self.user]
        if self.read_only:
            out += ["--read-only", "--read-only-tmpfs=false"]
        if self.drop_all:
            out += ["--cap-drop", "all"]
        if self.no_new_privileges:
            out += ["--security-opt", "no-new-privileges"]
        return out


@dataclass
class Network:
    """A podman bridge network standing in for a namespace's Services: each
    container has a fixed address, and every container's /etc/hosts names
    every address reserved so far (``broker-a-0.broker-a.duomq.svc``...).
    The network runs no DNS server: podman's (aardvark-dns 1.4) stalls
    lookups for up to 10 s whenever a container on the network stops or
    starts, which a restarted pod must not depend on here."""
    name: str = field(default_factory=lambda: f"duomq-test-{uuid.uuid4().hex[:8]}")
    containers: list[str] = field(default_factory=list)
    hosts: dict[str, str] = field(default_factory=dict)      # alias -> address
    addresses: dict[str, str] = field(default_factory=dict)  # container -> address

    def __enter__(self) -> Network:
        podman("network", "create", "--disable-dns", self.name)
        info = json.loads(podman("network", "inspect", self.name).stdout)[0]
        self._net = ipaddress.ip_network(info["subnets"][0]["subnet"])
        self._next = 10                                  # .1 is the gateway
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def reserve(self, name: str, aliases: Sequence[str] = ()) -> str:
        """The address of container ``name``, and its names in every
        container started from now on."""
        if name not in self.addresses:
            self.addresses[name] = str(self._net.network_address + self._next)
            self._next += 1
        for alias in (name, *aliases):
            self.hosts[alias] = self.addresses[name]
        return self.addresses[name]

    def run(self, name: str, image: str, args: list[str], *, env: dict[str, str],
            aliases: Sequence[str] = (), volumes: Sequence[str] = (), tmpfs: Sequence[str] = (),
            security: PodSecurity | None = None, entrypoint: list[str] | None = None,
            hostname: str | None = None, labels: dict[str, str] | None = None) -> Container:
        """``podman run -d`` on this network; the container keeps its name
        and address across restarts, as a StatefulSet's pod its DNS name.
        Its podman name carries the network's (``broker-a-0-1a2b3c4d``):
        names are global to the host, and a run killed before it removed
        its containers must not stop the next one from starting."""
        ip = self.reserve(name, aliases)
        container = f"{name}-{self.name.rsplit('-', 1)[-1]}"
        # the MAC address follows from the fixed address too: a container
        # started again (or made again) with a new one is unreachable from
        # the others until their ARP entries for its address go stale (a CLI
        # call in the admin container failed "no connection" for seconds)
        mac = "02:42:" + ":".join(f"{int(o):02x}" for o in ip.split("."))
        cmd = ["run", "-d", "--name", container, "--network", self.name, "--ip", ip,
               "--mac-address", mac, *run_flags(), "--hostname", hostname or name]
        for alias, address in self.hosts.items():
            if alias != (hostname or name):              # podman adds the container's own
                cmd += ["--add-host", f"{alias}:{address}"]
        for k, v in env.items():
            cmd += ["--env", f"{k}={v}"]
        for k, v in (labels or {}).items():
            cmd += ["--label", f"{k}={v}"]
        for v in volumes:
            cmd += ["--volume", v]
        for t in tmpfs:
            cmd += ["--tmpfs", t]
        cmd += (security or PodSecurity()).flags()
        if entrypoint:
            cmd += ["--entrypoint", json.dumps(entrypoint)]
        self.containers.append(container)
        podman(*cmd, image, *args)
        return Container(container)

    def remove(self) -> None:
        for name in reversed(self.containers):
            podman("rm", "-f", "-t", "0", name, check=False)
        self.containers.clear()
        podman("network", "rm", "-f", self.name, check=False)


@dataclass
class Container:
    name: str

    def exec(self, command: list[str], timeout_s: float = 60,
             env: dict[str, str] | None = None) -> tuple[int, str]:
        """``podman exec``, as the kubelet runs a probe or a hook: exit code
        and output; a command that outlives ``timeout_s`` fails."""
        extra = [x for k, v in (env or {}).items() for x in ("--env", f"{k}={v}")]
        try:
            p = podman("exec", *extra, self.name, *command, timeout_s=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            return 124, f"timed out after {timeout_s} s"
        return p.returncode, p.stdout + p.stderr

    def healthcheck(self) -> tuple[int, str]:
        """The image's own HEALTHCHECK, run once (``podman healthcheck run``)."""
        p = podman("healthcheck", "run", self.name, check=False)
        return p.returncode, (p.stdout + p.stderr).strip()

    def kill(self, signal: str = "KILL") -> None:
        podman("kill", "-s", signal, self.name)

    def stop(self, grace_s: float) -> float:
        """SIGTERM, then SIGKILL after ``grace_s``: seconds until it stopped."""
        t0 = time.monotonic()
        podman("stop", "-t", str(int(grace_s)), self.name, timeout_s=grace_s + 30)
        return time.monotonic() - t0

    def start(self) -> None:
        podman("start", self.name)

    def wait(self, timeout_s: float) -> int:
        return int(podman("wait", self.name, timeout_s=timeout_s).stdout.strip())

    def state(self) -> dict:
        return json.loads(podman("inspect", self.name).stdout)[0]["State"]

    def running(self) -> bool:
        return bool(self.state().get("Running"))

    def logs(self, tail: int = 80) -> str:
        p = podman("logs", "--tail", str(tail), self.name, check=False)
        return p.stdout + p.stderr

    def diff(self) -> list[str]:
        """What the container changed in its image's file system."""
        return [line for line in podman("diff", self.name).stdout.splitlines() if line.strip()]

    def top_users(self) -> set[str]:
        out = podman("top", self.name, "user", "huser").stdout.splitlines()[1:]
        return {word for line in out for word in line.split()}
