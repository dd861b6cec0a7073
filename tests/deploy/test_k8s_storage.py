"""deploy/k8s's storage, rendered by the real kustomize and validated by
`kubernetes-validate --strict`: volumes are not re-owned file by file at
each mount, and components/storage-class puts the brokers' and ZooKeeper's
claims on a class whose example says what a store needs (binding where the
pod goes, kept volumes, expansion)."""

import pathlib

import pytest
import yaml
from kubernetes_validate import utils as kv_utils
from packaging.version import Version

from duomq.testing.k8s import (
    K8S,
    OVERLAYS,
    named,
    of_kind,
    prod_with,
    render,
    strict_validate,
    workloads,
)

COMPONENT = pathlib.Path(K8S) / "components" / "storage-class"
NEWEST = max((v for v in kv_utils.all_versions()), key=Version)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_volumes_are_not_reowned_at_each_mount(overlay):
    seen = 0
    for doc, _meta, spec in workloads(render(f"overlays/{overlay}")):
        pod = spec["securityContext"]
        if "fsGroup" in pod:
            assert pod["fsGroupChangePolicy"] == "OnRootMismatch", doc["metadata"]["name"]
            seen += 1
    assert seen >= 3            # the brokers, ZooKeeper, the Spark job


def test_the_storage_class_component_names_the_class_of_every_store(tmp_path):
    text = prod_with(tmp_path, "storage-class")
    docs = [d for d in yaml.safe_load_all(text) if d]
    stores = [sts for sts in of_kind(docs, "StatefulSet")]
    assert len(stores) == 4                              # three groups and the ensemble
    for sts in stores:
        claims = sts["spec"]["volumeClaimTemplates"]
        assert claims and all(c["spec"]["storageClassName"] == "duomq" for c in claims), \
            sts["metadata"]["name"]
    assert "storageClassName" not in named(docs, "PersistentVolumeClaim",
                                           "spark-minutes")["spec"]
    p = strict_validate(text, NEWEST, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    # without the component: the cluster's default class
    assert not any("storageClassName" in c["spec"] for sts in of_kind(render("overlays/prod"),
                                                                         "StatefulSet")
                   for c in sts["spec"]["volumeClaimTemplates"])


def test_the_example_class_binds_where_the_pod_goes_keeps_volumes_and_grows(tmp_path):
    text = (COMPONENT / "storage-class.example.yaml").read_text()
    (cls,) = [d for d in yaml.safe_load_all(text) if d]
    assert cls["kind"] == "StorageClass" and cls["metadata"]["name"] == "duomq"
    assert cls["volumeBindingMode"] == "WaitForFirstConsumer"
    assert cls["reclaimPolicy"] == "Retain" and cls["allowVolumeExpansion"] is True
    p = strict_validate(text, NEWEST, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
