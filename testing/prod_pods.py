"""The prod overlay's pods as podman containers (tests/deploy): a
three-server ZooKeeper ensemble and the broker pair broker-a, each started as
its StatefulSet's pod would be (see tests/deploy/test_containers.py for what
differs from a cluster)."""

from __future__ import annotations

import contextlib
import json
import pathlib
from collections.abc import Iterator

from duomq import __version__
from duomq.testing.harness import wait_for
from duomq.testing.k8s import generated, named, render
from duomq.testing.podman import Network, PodSecurity
from duomq.testing.pods import PodContainer

ROOT = pathlib.Path(__file__).resolve().parent.parent
ZOOKEEPER_SHIMS = ROOT / "tests" / "deploy" / "zookeeper_image"
SPARK_IMAGE = f"duomq/duomq-spark:{__version__}"
BROKER_IMAGE = f"duomq/duomq:{__version__}"
CLIENT = {"duomq.io/client": "true"}
# run in a broker's container: the group's master as ZooKeeper holds it
MASTER_ID = """
import os
from duomq.coordinator import zk as zkutil
from duomq.coordinator.paths import ZkPaths
zk = zkutil.connect(os.environ["DUOMQ_ZOOKEEPER"])
node = zk.exists(ZkPaths(os.environ["DUOMQ_CLUSTER"]).master("broker-a"))
print(zkutil.loads(zk.get(ZkPaths(os.environ["DUOMQ_CLUSTER"]).master("broker-a"))[0])
      ["broker_id"] if node else "")
zkutil.close(zk)
"""


class Cluster:
    """The prod overlay's ZooKeeper pods and the broker-a pair, on one network."""

    def __init__(self, net: Network, root: pathlib.Path, *, advertise_ips: bool = False):
        """``advertise_ips``: brokers advertise their container IPs instead
        of their pods' DNS names, so that a process on the host (a drill)
        reaches them."""
        self.docs = render("overlays/prod")
        self.net, self.root = net, root
        self.cluster_env = generated(self.docs, "ConfigMap", "duomq-cluster")["data"]
        zk = named(self.docs, "StatefulSet", "zk")
        shims = ZOOKEEPER_SHIMS
        self.zk = [PodContainer(net, self.docs, zk, root, i, image=SPARK_IMAGE, extra_volumes=[
            f"{shims / 'docker-entrypoint.sh'}:/docker-entrypoint.sh:ro",
            f"{shims / 'zkServer.sh'}:/usr/local/bin/zkServer.sh:ro"],
            extra_tmpfs=["/conf:rw,mode=1777"]) for i in range(zk["spec"]["replicas"])]
        self.sts = named(self.docs, "StatefulSet", "broker-a")
        base = self.sts["metadata"]["name"]
        self.brokers = [PodContainer(net, self.docs, self.sts, root, i, extra_env={
            "DUOMQ_ADVERTISED_HOST": net.reserve(f"{base}-{i}")} if advertise_ips else None)
            for i in range(self.sts["spec"]["replicas"])]

    def start(self) -> None:
        for pod in self.zk:                            # podManagementPolicy: Parallel
            pod.start()
        for pod in self.zk:
            wait_for(lambda pod=pod: pod.probe("readinessProbe") == 0, 90, f"{pod.name} in a quorum")
            assert pod.probe("livenessProbe") == 0
        for pod in self.brokers:
            pod.start()
        for pod in self.brokers:
            self.wait_ready(pod)

    @staticmethod
    def wait_ready(pod: PodContainer) -> None:
        if pod.container.get("startupProbe"):
            wait_for(lambda: pod.probe("startupProbe") == 0, 60, f"{pod.name}'s startup probe")
        wait_for(lambda: pod.probe("readinessProbe") == 0, 60, f"{pod.name} to be ready")
        assert pod.probe("livenessProbe") == 0

    def status(self, via: PodContainer | None = None) -> dict:
        """`duomq status --json`, run in a broker's container (``via``, or
        the first that answers); {} when none could."""
        self.status_error = ""
        for pod in [via] if via else self.brokers:
            if pod.handle is not None and pod.handle.running():
                rc, out = pod.exec(["duomq", "status", "--json"], 30)
                if rc == 0:
                    return json.loads(out)
                self.status_error += f"{pod.name}: exit {rc}: {out[-1500:]}\n"
        return {}

    def roles(self, via: PodContainer | None = None) -> dict[int, str]:
        return {b["id"]: b.get("role") for b in self.status(via).get("brokers", [])
                if b["group"] == "broker-a"}

    def master_id(self, via: PodContainer) -> int | None:
        """The master's broker id as ZooKeeper holds it, read in ``via``'s
        container (the election's own record, with no broker asked)."""
        rc, out = via.exec(["python", "-c", MASTER_ID], 30)
        return int(out) if rc == 0 and out.strip().isdigit() else None

    def master(self) -> PodContainer:
        (mid,) = [i for i, r in self.roles().items() if r == "MASTER"]
        return self.brokers[mid]

    def client(self, name: str, image: str, entrypoint: list[str], args: list[str],
               volumes: list[str]):
        """A client pod: the cluster's ConfigMap in its environment, uid
        10001, a read-only root."""
        return self.net.run(name, image, args, env=dict(self.cluster_env), volumes=volumes,
                            tmpfs=["/tmp:rw,size=256m,mode=1777"], labels=CLIENT,
                            security=PodSecurity(user="10001:10001", read_only=True,
                                                 drop_all=True, no_new_privileges=True),
                            entrypoint=entrypoint)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.handle.logs(40)}"
                         for p in self.zk + self.brokers if p.handle)




@contextlib.contextmanager
def running(root: pathlib.Path, *, advertise_ips: bool = False) -> Iterator[Cluster]:
    """The prod pods started on a network of their own (removed after);
    the containers' logs are printed when they do not start."""
    with Network() as net:
        c = Cluster(net, root, advertise_ips=advertise_ips)
        try:
            c.start()
        except BaseException:
            print(c.logs())
            raise
        yield c
