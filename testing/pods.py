"""A pod of a rendered workload (``dev.k8s``) run as a podman container
(``dev.podman``): the image, command and arguments, the environment the
kubelet builds, the security context, its volumes (ConfigMaps as read-only
files, claims as directories owned by the pod's fsGroup, emptyDirs as
directories of the pod's that outlive a container's restart and not the
pod, as the kubelet's do) and the DNS names a StatefulSet's pod has. Probes and hooks run in
it with ``podman exec``, as the kubelet runs them.

Kept as in the cluster: everything above. Not: CPU and memory limits (this
host has 2 cores and cgroups v1), and the Service objects themselves (each
container's /etc/hosts names every pod, at an address that stays across
restarts, instead of cluster DNS).
"""

from __future__ import annotations

import base64
import os
import pathlib
import shutil
from collections.abc import Sequence

from duomq.testing.k8s import container_env, named, pod_template
from duomq.testing.podman import Container, Network, PodSecurity, podman


class PodContainer:
    """Pod ``ordinal`` of ``workload`` (a StatefulSet; ``ordinal`` None for
    a Job's pod). ``image``, ``entrypoint`` and ``args`` replace the
    manifest's where it names an image this host cannot have."""

    def __init__(self, net: Network, docs: list[dict], workload: dict, root: pathlib.Path,
                 ordinal: int | None = None, *, pod_name: str | None = None,
                 image: str | None = None, entrypoint: list[str] | None = None,
                 args: list[str] | None = None, extra_env: dict[str, str] | None = None,
                 extra_volumes: Sequence[str] = (), extra_tmpfs: Sequence[str] = ()):
        template = pod_template(workload)
        if template is None:
            raise ValueError(f"a {workload.get('kind')} has no pod template")
        self.spec = template["spec"]
        self.labels = dict((template.get("metadata") or {}).get("labels") or {})
        (self.container,) = self.spec["containers"]
        base = workload["metadata"]["name"]
        self.name = pod_name or (f"{base}-{ordinal}" if ordinal is not None else f"{base}-pod")
        self.namespace = workload["metadata"]["namespace"]
        self.env = container_env(docs, workload, self.container, self.name)
        self.env.update(extra_env or {})
        self.security = PodSecurity.of(self.spec, self.container)
        self.dir = root / self.name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.volumes = list(extra_volumes) + self._volumes(docs, workload)
        self.tmpfs = list(extra_tmpfs)
        self.volumes += self._empty_dirs()
        self.aliases = []
        if workload["kind"] == "StatefulSet":
            service = workload["spec"]["serviceName"]
            self.aliases = [f"{self.name}.{service}", f"{self.name}.{service}.{self.namespace}.svc",
                            f"{self.name}.{service}.{self.namespace}.svc.cluster.local"]
        self.image = image or self.container["image"]
        self.entrypoint = entrypoint or self.container.get("command")
        self.args = args if args is not None else list(self.container.get("args") or [])
        self.net = net
        net.reserve(self.name, self.aliases)     # known to every pod started after it
        self.handle: Container | None = None

    # ---------------------------------------------------------------- volumes

    def _owner(self) -> tuple[int, int]:
        pod = self.spec.get("securityContext") or {}
        uid = pod.get("runAsUser", 0)
        return uid, pod.get("fsGroup", pod.get("runAsGroup", uid))

    def _claim_dir(self, name: str) -> str:
        path = self.dir / "claims" / name
        if not path.exists():
            path.mkdir(parents=True)
            os.chown(path, *self._owner())
            path.chmod(0o2775)
        return str(path)

    def _volumes(self, docs, workload) -> list[str]:
        volumes = {v["name"]: v for v in self.spec.get("volumes") or []}
        claims = {t["metadata"]["name"] for t in workload["spec"].get("volumeClaimTemplates", [])}
        out = []
        for m in self.container.get("volumeMounts") or []:
            target, ro = m["mountPath"], ":ro" if m.get("readOnly") else ""
            v = volumes.get(m["name"], {})
            if m["name"] in claims:
                out.append(f"{self._claim_dir(m['name'])}:{target}{ro}")
            elif "persistentVolumeClaim" in v:
                out.append(f"{self._claim_dir(v['persistentVolumeClaim']['claimName'])}:{target}{ro}")
            elif "configMap" in v or "secret" in v:
                files = self._files(docs, v)
                if files is not None:              # an optional Secret that is not there
                    out.append(f"{files}:{target}:ro")   # the kubelet mounts both read-only
        return out

    def _files(self, docs, volume: dict) -> pathlib.Path | None:
        """A ConfigMap's or Secret's keys as files in a directory of their own."""
        if "configMap" in volume:
            data = {k: v.encode() for k, v in
                    (named(docs, "ConfigMap", volume["configMap"]["name"]).get("data") or {}).items()}
        else:
            found = [d for d in docs if d["kind"] == "Secret"
                     and d["metadata"]["name"] == volume["secret"]["secretName"]]
            if not found:
                if volume["secret"].get("optional"):
                    return None
                raise AssertionError(f"secret {volume['secret']['secretName']} is not rendered")
            data = {k: base64.b64decode(v) for k, v in (found[0].get("data") or {}).items()}
        items = (volume.get("configMap") or volume.get("secret") or {}).get("items")
        if items is not None:                      # only the keys named, at their paths
            missing = {i["key"] for i in items} - set(data)
            assert not missing, f"volume {volume['name']}: no key {sorted(missing)}"
            data = {i["path"]: data[i["key"]] for i in items}
        files = self.dir / "mounts" / volume["name"]
        files.mkdir(parents=True, exist_ok=True)
        for key, content in data.items():
            (files / key).write_bytes(content)
            (files / key).chmod(0o644)
        files.chmod(0o755)
        return files

    def _empty_dirs(self) -> list[str]:
        """The emptyDirs' mounts: a directory each under the pod's, made
        empty when the pod is (``start``, ``recreate``) and kept across a
        container's restart, as the kubelet's (with a tmpfs each, a ZooKeeper
        pod started again by ``podman start`` could not write its zoo.cfg)."""
        empty = {v["name"] for v in self.spec.get("volumes") or [] if "emptyDir" in v}
        return [f"{self.dir / 'empty' / m['name']}:{m['mountPath']}"
                for m in self.container.get("volumeMounts") or [] if m["name"] in empty]

    def _empty(self) -> None:
        """Every emptyDir made anew: empty, writable by the pod's user."""
        root = self.dir / "empty"
        shutil.rmtree(root, ignore_errors=True)
        for v in self.spec.get("volumes") or []:
            if "emptyDir" in v:
                (root / v["name"]).mkdir(parents=True)
                (root / v["name"]).chmod(0o1777)

    # -------------------------------------------------------------- lifecycle

    def start(self) -> PodContainer:
        """The pod's first start; later starts (``restart``) keep the
        container, its name and its volumes, as a StatefulSet's pod."""
        self._empty()
        self.handle = self.net.run(self.name, self.image, self.args, env=self.env,
                                   aliases=self.aliases, volumes=self.volumes, tmpfs=self.tmpfs,
                                   security=self.security, entrypoint=self.entrypoint,
                                   labels=self.labels)
        return self

    def _running(self) -> Container:
        if self.handle is None:
            raise RuntimeError(f"pod {self.name} was never started")
        return self.handle

    def restart(self) -> None:
        self._running().start()

    def recreate(self, image: str) -> None:
        """The pod made again by its StatefulSet on a new template (its
        image): a new container of the same name, address and volumes."""
        podman("rm", "-f", "-t", "0", self._running().name, check=False)
        self.image = image
        self.start()

    def exec(self, command: list[str], timeout_s: float) -> tuple[int, str]:
        return self._running().exec(command, timeout_s)

    def probe(self, which: str) -> int:
        """Run the container's ``which`` probe (its exec command) once."""
        probe = self.container[which]
        return self.exec(probe["exec"]["command"], probe.get("timeoutSeconds", 1) + 5)[0]

    def pre_stop(self) -> tuple[int, str]:
        hook = self.container["lifecycle"]["preStop"]["exec"]["command"]
        return self.exec(hook, self.spec.get("terminationGracePeriodSeconds", 30))

    def stop(self) -> float:
        """SIGTERM with the pod's grace period, as the kubelet after preStop."""
        return self._running().stop(self.spec.get("terminationGracePeriodSeconds", 30))
