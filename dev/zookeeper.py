"""One ZooKeeper launcher for ``duomq dev`` and the test fixture.

Order: an explicit ``--zookeeper host:port[,...]``; else a testcontainers
ZooKeeper when a Docker engine answers; else a local server run from Debian's
``zookeeper`` package or from the ZooKeeper jars inside the pyspark wheel.
Every launch uses a fresh data dir and a free port, waits until ``srvr``
answers with a ``Mode:`` line, and stops cleanly.
"""

from __future__ import annotations

import glob
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from duomq.common.zk_tls import ZK_CA, ZK_SERVER, load_ca
from duomq.coordinator.zk import four_letter
from duomq.coordinator.zk import server_mode as zk_server_mode
from duomq.dev import processes
from duomq.dev.ports import free_port

log = logging.getLogger(__name__)
DEBIAN_JARS = ["/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar"]
# the secure client port runs on Netty (Debian's jars, beside ZooKeeper's)
NETTY_JARS = [f"/usr/share/java/netty-{m}.jar" for m in (
    "buffer", "codec", "common", "handler", "resolver", "transport",
    "transport-native-epoll", "transport-native-unix-common")]


class ZooKeeperUnavailable(RuntimeError):
    pass


def wait_ready(host: str, port: int, timeout_s: float = 30.0, proc=None,
               tls_ca: str | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise ZooKeeperUnavailable(f"ZooKeeper exited with code {proc.returncode}")
        try:
            if "Mode:" in four_letter(host, port, tls_ca=tls_ca):
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise ZooKeeperUnavailable(f"ZooKeeper at {host}:{port} not ready in {timeout_s:g} s")


@dataclass
class ZooKeeperHandle:
    connect: str                       # host:port for clients
    kind: str                          # external | container | local
    pid: int | None = None
    started: float | None = None       # the process's start time (psutil), with the pid
    data_dir: str | None = None
    log_path: str | None = None
    _proc: subprocess.Popen | None = field(default=None, repr=False)
    _container: Any = field(default=None, repr=False)     # a testcontainers container
    _owns_dir: bool = False

    def stop(self) -> None:
        if self._container is not None:
            self._container.stop()
        elif self._proc is not None:       # this process's child: no doubt whose pid it is
            if self._proc.poll() is None:
                self._proc.terminate()
                try:
                    self._proc.wait(processes.STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait(processes.STOP_TIMEOUT_S)
        elif self.pid:
            processes.stop(self.pid, self.started)
        if self._owns_dir and self.data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def log_tail(self, lines: int = 60) -> str:
        if not self.log_path or not os.path.exists(self.log_path):
            return ""
        with open(self.log_path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])


def debian_classpath() -> str | None:
    if not all(os.path.exists(j) for j in DEBIAN_JARS):
        return None
    return ":".join(DEBIAN_JARS + [j for j in NETTY_JARS if os.path.exists(j)])


def pyspark_classpath() -> str | None:
    """The pyspark wheel ships ZooKeeper (and everything it needs) in jars/."""
    try:
        import pyspark
    except ImportError:
        return None
    jars = os.path.join(os.path.dirname(pyspark.__file__), "jars")
    if glob.glob(os.path.join(jars, "zookeeper-3*.jar")):
        return os.path.join(jars, "*")
    return None


def classpath() -> str | None:
    """Debian's jars, else the jars inside the pyspark wheel."""
    return debian_classpath() or pyspark_classpath()


def docker_available(timeout_s: float = 2.0) -> bool:
    """Does a Docker engine answer ``GET /_ping``? (A raw probe: the docker
    library leaks its socket when the engine is absent.)"""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        if host.startswith("unix://"):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(timeout_s)
            target: str | tuple[str, int] = host[len("unix://"):]
        elif host.startswith("tcp://"):
            h, _, p = host[len("tcp://"):].rpartition(":")
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.settimeout(timeout_s)
            target = (h, int(p))
        else:
            return False
        with sock:
            sock.connect(target)
            sock.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            return b" 200 " in sock.recv(1024)
    except (OSError, ValueError):
        return False


def start_container() -> ZooKeeperHandle:
    os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
    from testcontainers.core.container import DockerContainer
    container = DockerContainer("zookeeper:3.9").with_exposed_ports(2181) \
        .with_env("ZOO_4LW_COMMANDS_WHITELIST", "srvr,ruok,mntr")
    container.start()
    host = container.get_container_host_ip()
    port = int(container.get_exposed_port(2181))
    wait_ready(host, port)
    return ZooKeeperHandle(f"{host}:{port}", "container", _container=container)


def sasl_config(data_dir: str, users: dict[str, str]) -> tuple[list[str], list[str]]:
    """An ensemble that requires a SASL (DIGEST-MD5) login of every session,
    as ZooKeeper's admin guide configures one: a JAAS ``Server`` section
    listing ``users`` (name: password), the SASL provider, and
    ``enforce.auth`` (3.7+). The zoo.cfg lines and the JVM flags."""
    jaas = os.path.join(data_dir, "jaas.conf")
    with open(jaas, "w") as f:
        f.write("Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
                + "".join(f'  user_{u}="{p}"\n' for u, p in users.items()) + "  ;\n};\n")
    os.chmod(jaas, 0o600)
    return (["authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
             "enforce.auth.enabled=true", "enforce.auth.schemes=sasl"],
            [f"-Djava.security.auth.login.config={jaas}"])


def tls_config(tls_dir: str, port: int) -> list[str]:
    """zoo.cfg lines for a server whose only client port is its secure one
    (TLS, the key and certificate ``duomq auth init`` wrote in ``tls_dir``),
    on Netty, as ZooKeeper's admin guide configures one."""
    return ["serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
            f"secureClientPort={port}", "secureClientPortAddress=127.0.0.1",
            f"ssl.keyStore.location={os.path.join(tls_dir, ZK_SERVER)}", "ssl.keyStore.type=PEM",
            f"ssl.trustStore.location={os.path.join(tls_dir, ZK_CA)}", "ssl.trustStore.type=PEM",
            "ssl.clientAuth=none"]


def start_local(data_dir: str | None = None, port: int | None = None,
                detach: bool = False, cp: str | None = None,
                sasl_users: dict[str, str] | None = None,
                tls_dir: str | None = None) -> ZooKeeperHandle:
    """Run a standalone server as a foreground Java process (ours, not
    systemd's); with ``sasl_users``, one that requires their SASL login;
    with ``tls_dir`` (an ``auth_dir``), one that speaks only TLS."""
    cp = cp or classpath()
    java = shutil.which("java")
    if cp is None or java is None:
        raise ZooKeeperUnavailable(
            "no ZooKeeper to run: install Debian's 'zookeeper' package (apt-get install "
            "zookeeper) or pyspark, and Java 17 (" + ("java found" if java else "java missing") + ")")
    owns = data_dir is None
    data_dir = data_dir or tempfile.mkdtemp(prefix="duomq-zk-")
    if os.path.isdir(os.path.join(data_dir, "version-2")):
        shutil.rmtree(os.path.join(data_dir, "version-2"))  # fresh: no stale sessions
    os.makedirs(data_dir, exist_ok=True)
    port = port or free_port()
    sasl_lines, jvm_flags = sasl_config(data_dir, sasl_users) if sasl_users else ([], [])
    cfg = os.path.join(data_dir, "zoo.cfg")
    ports = tls_config(tls_dir, port) if tls_dir else [f"clientPort={port}",
                                                        "clientPortAddress=127.0.0.1"]
    with open(cfg, "w") as f:
        f.write("\n".join([
            "tickTime=500", "initLimit=20", "syncLimit=10", f"dataDir={data_dir}",
            *ports, "admin.enableServer=false",
            "4lw.commands.whitelist=srvr,ruok,mntr", "minSessionTimeout=1000",
            "maxSessionTimeout=20000", "maxClientCnxns=0", *sasl_lines, ""]))
    log_path = os.path.join(data_dir, "zookeeper.log")
    logf = open(log_path, "ab")
    proc = subprocess.Popen(
        [java, "-Xmx256m", "-XX:+UseSerialGC", "-Dzookeeper.admin.enableServer=false",
         *jvm_flags, "-cp", cp, "org.apache.zookeeper.server.ZooKeeperServerMain", cfg],
        stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=detach)
    logf.close()
    handle = ZooKeeperHandle(f"127.0.0.1:{port}", "local", proc.pid,
                             processes.started_at(proc.pid), data_dir, log_path,
                             _proc=None if detach else proc, _owns_dir=owns)
    try:
        wait_ready("127.0.0.1", port, proc=proc, tls_ca=load_ca(tls_dir) if tls_dir else None)
    except ZooKeeperUnavailable:
        tail = handle.log_tail()
        handle.stop()
        raise ZooKeeperUnavailable(f"local ZooKeeper did not start; log tail:\n{tail}") from None
    return handle


def ensemble_config(n: int, data_dir: str) -> list[dict]:
    """The servers of an ``n``-server ensemble on 127.0.0.1 under
    ``data_dir/zk<i>``: ports, directories and each one's zoo.cfg, written."""
    servers: list[dict[str, Any]] = [
        {"id": i, "port": free_port(), "peer": free_port(), "election": free_port(),
         "dir": os.path.join(data_dir, f"zk{i}")} for i in range(1, n + 1)]
    quorum = [f"server.{s['id']}=127.0.0.1:{s['peer']}:{s['election']}" for s in servers]
    for s in servers:
        os.makedirs(s["dir"], exist_ok=True)
        with open(os.path.join(s["dir"], "myid"), "w") as f:
            f.write(f"{s['id']}\n")
        s["cfg"] = os.path.join(s["dir"], "zoo.cfg")
        s["log"] = os.path.join(s["dir"], "zookeeper.log")
        with open(s["cfg"], "w") as f:
            f.write("\n".join([
                "tickTime=500", "initLimit=20", "syncLimit=10", f"dataDir={s['dir']}",
                f"clientPort={s['port']}", "clientPortAddress=127.0.0.1",
                "admin.enableServer=false", "4lw.commands.whitelist=srvr,ruok,mntr",
                "minSessionTimeout=1000", "maxSessionTimeout=20000", "maxClientCnxns=0",
                *quorum, ""]))
    return servers


def start_server(server: dict, cp: str | None = None) -> tuple[int, float | None]:
    """Start one ensemble server in the background (its own session); its
    pid and start time."""
    cp = cp or classpath()
    java = shutil.which("java")
    if cp is None or java is None:
        raise ZooKeeperUnavailable("no ZooKeeper to run: install Debian's 'zookeeper' package "
                                   "and Java 17")
    with open(server["log"], "ab") as logf:
        proc = subprocess.Popen(
            [java, "-Xmx256m", "-XX:+UseSerialGC", "-Dzookeeper.admin.enableServer=false",
             "-cp", cp, "org.apache.zookeeper.server.quorum.QuorumPeerMain", server["cfg"]],
            stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
    return proc.pid, processes.started_at(proc.pid)


def server_mode(server: dict) -> str:
    """leader, follower, or "" (down, or not in a quorum)."""
    return zk_server_mode("127.0.0.1", server["port"])


def start_ensemble(n: int, data_dir: str, timeout_s: float = 60.0) -> list[dict]:
    """An ``n``-server ensemble on 127.0.0.1, every server in the background;
    returns the servers (with ``pid``, ``started``) once a quorum serves."""
    servers = ensemble_config(n, data_dir)
    for s in servers:
        s["pid"], s["started"] = start_server(s)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        modes = [server_mode(s) for s in servers]
        if "leader" in modes and modes.count("follower") == n - 1:
            return servers
        time.sleep(0.2)
    for s in servers:
        processes.stop(s["pid"], s["started"])
    raise ZooKeeperUnavailable(f"a {n}-server ZooKeeper ensemble did not form within "
                               f"{timeout_s:g} s (logs under {data_dir})")


def launch(zookeeper: str | None = None, *, data_dir: str | None = None,
           detach: bool = False, tls_dir: str | None = None) -> ZooKeeperHandle:
    """The launcher's order of preference (see the module docstring);
    ``tls_dir``: a server of our own speaks only TLS, with its keys."""
    if zookeeper:
        host, _, port = zookeeper.split(",")[0].split("/")[0].rpartition(":")
        wait_ready(host or "127.0.0.1", int(port), timeout_s=10)
        return ZooKeeperHandle(zookeeper, "external")
    if not detach and tls_dir is None and docker_available():
        try:
            return start_container()
        except Exception as exc:
            log.warning("testcontainers ZooKeeper failed (%s); using a local server", exc)
    return start_local(data_dir=data_dir, detach=detach, tls_dir=tls_dir)
