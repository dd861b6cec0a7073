"""The prod overlay's pods as podman containers (tests/deploy): a
three-server ZooKeeper ensemble and the broker pair broker-a, each started as
its StatefulSet's pod would be (see tests/deploy/test_containers.py for what
differs from a cluster); secured (``components/auth``), with the Secret
``kubectl create secret`` makes from ``duomq auth init``'s files."""

from __future__ import annotations

import contextlib
import json
import pathlib
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator

import yaml

from duomq import __version__
from duomq.common.role import Role
from duomq.testing.harness import run_cli, wait_for
from duomq.testing.k8s import generated, kubectl, named, prod_with
from duomq.testing.podman import Container, Network, PodSecurity
from duomq.testing.pods import PodContainer

ROOT = pathlib.Path(__file__).resolve().parent.parent
ZOOKEEPER_SHIMS = ROOT / "tests" / "deploy" / "zookeeper_image"
# what `make image` builds, in the host's own image store (podman's localhost/)
SPARK_IMAGE = f"localhost/duomq/duomq-spark:{__version__}"
BROKER_IMAGE = f"localhost/duomq/duomq:{__version__}"
# the user's overlay on top of prod, naming their registry: here that store
LOCAL_IMAGES = f"""images:
  - name: registry.invalid/duomq/duomq
    newName: localhost/duomq/duomq
    newTag: "{__version__}"
  - name: registry.invalid/duomq/duomq-spark
    newName: localhost/duomq/duomq-spark
    newTag: "{__version__}"
"""
CLIENT = {"duomq.io/client": "true"}
# run in a broker's container: the group's master as ZooKeeper holds it
MASTER_ID = """
import os
from duomq.coordinator import zk as zkutil
from duomq.coordinator.nodes import MasterNode
from duomq.coordinator.paths import ZkPaths
from kazoo.exceptions import NoNodeError
zk = zkutil.connect(os.environ["DUOMQ_ZOOKEEPER"])
try:
    print(MasterNode.from_bytes(zk.get(ZkPaths(os.environ["DUOMQ_CLUSTER"]).master("broker-a"))[0])
          .broker_id)
except NoNodeError:
    print("")
zkutil.close(zk)
"""


class Cluster:
    """The prod overlay's ZooKeeper pods and the broker-a pair, on one network."""

    def __init__(self, net: Network, root: pathlib.Path, *, advertise_ips: bool = False,
                 docs: list[dict] | None = None, admin: pathlib.Path | None = None):
        """``advertise_ips``: brokers advertise their container IPs instead
        of their pods' DNS names, so that a process on the host (a drill)
        reaches them. ``docs``: the manifests (default: the prod overlay);
        ``admin``: a secured cluster's admin credentials, with which an
        admin container (``self.admin``) runs the CLI, since the broker pods
        have only the brokers' keys."""
        self.docs = docs if docs is not None else prod_docs(root)
        self.admin_credentials = admin
        self.admin: Container | None = None
        self.status_error = ""                   # why the last status() found none to answer
        self.net, self.root = net, root
        self.cluster_env = generated(self.docs, "ConfigMap", "duomq-cluster")["data"]
        zk = named(self.docs, "StatefulSet", "zk")
        shims = ZOOKEEPER_SHIMS
        self.zk = [PodContainer(net, self.docs, zk, root, i, image=SPARK_IMAGE, extra_volumes=[
            f"{shims / 'docker-entrypoint.sh'}:/docker-entrypoint.sh:ro",
            f"{shims / 'zkServer.sh'}:/usr/local/bin/zkServer.sh:ro"])
            for i in range(zk["spec"]["replicas"])]
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
        if self.admin_credentials is not None:
            mount = self.root / "admin-credentials"
            mount.mkdir(exist_ok=True)
            shutil.copy(self.admin_credentials, mount / "admin.json")
            (mount / "admin.json").chmod(0o644)        # a Secret mounted for uid 10001
            users = self.root / "admin-out"             # where `auth user add --out /users/..`
            users.mkdir(exist_ok=True)                  # writes
            users.chmod(0o777)
            self.admin = self.client("duomq-admin", BROKER_IMAGE, ["sleep", "infinity"], [],
                                     [f"{mount}:/var/run/secrets/duomq-admin:ro",
                                      f"{users}:/users"],
                                     env={"DUOMQ_CREDENTIALS":
                                          "/var/run/secrets/duomq-admin/admin.json"})

    @staticmethod
    def wait_ready(pod: PodContainer) -> None:
        if pod.container.get("startupProbe"):
            wait_for(lambda: pod.probe("startupProbe") == 0, 60, f"{pod.name}'s startup probe")
        wait_for(lambda: pod.probe("readinessProbe") == 0, 60, f"{pod.name} to be ready")
        assert pod.probe("livenessProbe") == 0

    def status(self, via: PodContainer | None = None) -> dict:
        """`duomq status --json`, run in a broker's container (``via``, or
        the first that answers), or on a secured cluster in the admin's;
        {} when none could."""
        self.status_error = ""
        for name, handle in self._cli(via):
            rc, out = handle.exec(["duomq", "status", "--json"], 30)
            if rc == 0:
                return json.loads(out)
            self.status_error += f"{name}: exit {rc}: {out[-1500:]}\n"
        return {}

    def _cli(self, via: PodContainer | None) -> list[tuple[str, Container]]:
        """Where to run the CLI: the admin's container if there is one,
        else ``via`` or every broker pod that runs."""
        if self.admin is not None:
            return [("duomq-admin", self.admin)]
        return [(p.name, p.handle) for p in ([via] if via else self.brokers)
                if p.handle is not None and p.handle.running()]

    def cli(self, *args: str, timeout_s: float = 60) -> tuple[int, str]:
        """``duomq ARGS`` in the admin's container, or the first broker pod."""
        (name, handle), *_ = self._cli(None)
        return handle.exec(["duomq", *args], timeout_s)

    def roles(self, via: PodContainer | None = None) -> dict[int, str]:
        return {b["id"]: b.get("role") for b in self.status(via).get("brokers", [])
                if b["group"] == "broker-a"}

    def master_id(self, via: PodContainer) -> int | None:
        """The master's broker id as ZooKeeper holds it, read in ``via``'s
        container (the election's own record, with no broker asked)."""
        ((_, handle),) = self._cli(via)[:1]
        rc, out = handle.exec(["python", "-c", MASTER_ID], 30)
        return int(out) if rc == 0 and out.strip().isdigit() else None

    def master(self) -> PodContainer:
        (mid,) = [i for i, r in self.roles().items() if r == Role.MASTER]
        return self.brokers[mid]

    def client(self, name: str, image: str, entrypoint: list[str], args: list[str],
               volumes: list[str], env: dict[str, str] | None = None) -> Container:
        """A client pod: the cluster's ConfigMap (and ``env``) in its
        environment, uid 10001, a read-only root."""
        return self.net.run(name, image, args, env={**self.cluster_env, **(env or {})},
                            volumes=volumes,
                            tmpfs=["/tmp:rw,size=256m,mode=1777"], labels=CLIENT,
                            security=PodSecurity(user="10001:10001", read_only=True,
                                                 drop_all=True, no_new_privileges=True),
                            entrypoint=entrypoint)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.handle.logs(40)}"
                         for p in self.zk + self.brokers if p.handle)


def client_progress(out: pathlib.Path) -> dict:
    """What tests/deploy/drill_client.py last wrote to ``out/progress.json``."""
    try:
        return json.loads((out / "progress.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {"acked": 0}


AUTH_STEPS = ROOT / "deploy" / "k8s" / "components" / "auth" / "kustomization.yaml"


def documented_init() -> list[str]:
    """The ``duomq auth init`` command the auth component's steps give
    (its continued lines joined, the comments dropped), without ``duomq``."""
    lines = AUTH_STEPS.read_text().splitlines()
    (start,) = [i for i, line in enumerate(lines) if line.startswith("#   duomq auth init ")]
    command = ""
    for line in lines[start:]:
        command += line.lstrip("#").split("  #")[0].strip().rstrip("\\") + " "
        if not line.rstrip().endswith("\\"):
            break
    words = shlex.split(command)
    assert words[:3] == ["duomq", "auth", "init"], words
    return words[1:]


def prod_docs(root: pathlib.Path) -> list[dict]:
    """The prod overlay as a user's overlay on top of it renders it, with
    the real kustomize, its images named in the host's store (where the
    user names their registry)."""
    where = tempfile.mkdtemp(prefix="manifests-", dir=root)
    return [d for d in yaml.safe_load_all(prod_with(where, extra=LOCAL_IMAGES)) if d]


def secured_docs(root: pathlib.Path, net: Network | None = None
                 ) -> tuple[list[dict], pathlib.Path]:
    """The prod overlay (secured: ``components/auth``) and the
    ``duomq-zookeeper-tls`` and ``duomq-credentials`` Secrets as the
    documented steps make them (``duomq auth init --out keys --zookeeper-tls
    ...``, the admin's file moved out, the ensemble's key moved to a
    directory of its own with the CA, ``kubectl create secret generic
    --from-file=`` of each), and the admin's
    credentials file. With ``net``, the ZooKeeper pods' addresses on it are
    reserved and named in the ensemble's certificate as well, as a user
    adds the names clients outside the cluster use: a drill on the host
    reaches the servers by address."""
    keys, admin = root / "keys", root / "duomq-admin.json"
    docs = prod_docs(root)
    init = documented_init()
    init[init.index("--out") + 1] = str(keys)
    if net is not None:
        for i in range(named(docs, "StatefulSet", "zk")["spec"]["replicas"]):
            init += ["--zookeeper-host", net.reserve(f"zk-{i}")]
    run_cli(*init)
    shutil.move(keys / "admin.json", admin)
    tls = root / "zookeeper-tls"                 # the ensemble's key: its pods' Secret alone
    tls.mkdir()
    shutil.move(keys / "zookeeper-server.pem", tls / "zookeeper-server.pem")
    shutil.copy(keys / "zookeeper-ca.pem", tls / "zookeeper-ca.pem")
    docs.append(secret("duomq-zookeeper-tls", docs, tls))
    docs.append(secret("duomq-credentials", docs, keys))
    return docs, admin


def secret(name: str, docs: list[dict], source: pathlib.Path) -> dict:
    """``kubectl create secret generic NAME --from-file=SOURCE`` in the
    namespace of ``docs``, as the document it would create."""
    (namespace,) = {d["metadata"]["namespace"] for d in docs if d["kind"] == "StatefulSet"}
    out = subprocess.run([kubectl(), "create", "secret", "generic", name, "-n", namespace,
                          f"--from-file={source}", "--dry-run=client", "-o", "yaml"],
                         check=True, capture_output=True, text=True, timeout=60).stdout
    return yaml.safe_load(out)




@contextlib.contextmanager
def running(root: pathlib.Path, *, advertise_ips: bool = False, docs: list[dict] | None = None,
            admin: pathlib.Path | None = None) -> Iterator[Cluster]:
    """The prod pods started on a network of their own (removed after);
    the containers' logs are printed when they do not start. Without
    ``docs``, the prod overlay with its Secret made as documented (and the
    admin's credentials)."""
    with Network() as net:
        if docs is None:
            docs, admin = secured_docs(root, net)
        c = Cluster(net, root, advertise_ips=advertise_ips, docs=docs, admin=admin)
        try:
            c.start()
        except BaseException:
            print(c.logs())
            raise
        yield c
