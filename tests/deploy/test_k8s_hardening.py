"""deploy/k8s held to what a pod needs to run for years, rendered by the
real kustomize: every container's root file system read-only, with a
writable volume for each path its program writes; ZooKeeper started behind
a startup probe, not a fixed delay; the scheduling components (a priority
class, dedicated nodes) where an overlay adds them. (The official ZooKeeper image cannot be
pulled here: its entrypoint's writes, to ZOO_CONF_DIR, ZOO_DATA_DIR,
ZOO_DATA_LOG_DIR, ZOO_LOG_DIR and the JVM's /tmp, are checked against the
mounts offline; the container tests run the server read-only from other
jars.)"""

import pytest
import yaml
from kubernetes_validate import utils as kv_utils
from packaging.version import Version

from duomq.testing.k8s import (
    OVERLAYS,
    containers,
    named,
    of_kind,
    prod_with,
    render,
    strict_validate,
)

NEWEST = max(kv_utils.all_versions(), key=Version)

ZK_WRITES = {"/conf", "/data", "/datalog", "/logs", "/tmp"}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_root_file_system_is_read_only(overlay):
    seen = 0
    for doc, _spec, c in containers(render(f"overlays/{overlay}")):
        assert (c.get("securityContext") or {}).get("readOnlyRootFilesystem") is True, \
            f"{doc['metadata']['name']}/{c['name']}"
        seen += 1
    assert seen >= 4


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_zookeeper_writes_only_to_its_volumes_and_starts_behind_a_probe(overlay):
    zk = named(render(f"overlays/{overlay}"), "StatefulSet", "zk")
    spec = zk["spec"]["template"]["spec"]
    (server,) = spec["containers"]
    mounts = {m["mountPath"]: m["name"] for m in server["volumeMounts"]}
    assert ZK_WRITES <= set(mounts)
    volumes = {v["name"]: v for v in spec["volumes"]}
    claims = {t["metadata"]["name"] for t in zk["spec"]["volumeClaimTemplates"]}
    for path in ZK_WRITES:
        name = mounts[path]
        assert name in claims or "emptyDir" in volumes[name], path
    # the image's /conf, copied into the writable one first, by the same image
    (init,) = spec["initContainers"]
    assert init["image"] == server["image"]
    assert "cp -a /conf/." in init["command"][-1]
    (target,) = [m["mountPath"] for m in init["volumeMounts"] if m["name"] == mounts["/conf"]]
    assert init["command"][-1].endswith(f"{target}/")
    # a startup probe, and liveness only after it
    startup, liveness = server["startupProbe"], server["livenessProbe"]
    assert startup["exec"] == liveness["exec"] and "initialDelaySeconds" not in liveness
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 300


def test_the_scheduling_components_place_the_stores_and_validate(tmp_path):
    """components/priority-class and components/dedicated-nodes in a user's
    overlay: every StatefulSet (three groups and the ensemble) gets the
    class, the node selector and the toleration; the PriorityClass is
    cluster-wide; the whole passes strict validation."""
    text = prod_with(tmp_path, "priority-class", "dedicated-nodes")
    docs = [d for d in yaml.safe_load_all(text) if d]
    (cls,) = of_kind(docs, "PriorityClass")
    assert "namespace" not in cls["metadata"] and cls["value"] == 1000000
    assert not cls["globalDefault"]
    stores = of_kind(docs, "StatefulSet")
    assert len(stores) == 4
    for sts in stores:
        spec = sts["spec"]["template"]["spec"]
        assert spec["priorityClassName"] == cls["metadata"]["name"]
        assert spec["nodeSelector"] == {"duomq.io/node": "true"}
        assert spec["tolerations"] == [{"key": "duomq.io/dedicated", "operator": "Equal",
                                        "value": "true", "effect": "NoSchedule"}]
    job = of_kind(docs, "CronJob")[0]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert "priorityClassName" not in job and "tolerations" not in job
    p = strict_validate(text, NEWEST, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
