"""deploy/k8s's monitoring, checked offline with the real kustomize and
promtool: the brokers' and ZooKeeper's metrics ports (annotations, Services,
NetworkPolicies), the PodMonitors and the PrometheusRule components, and
that what the alert rules select on is what the manifests give the targets.
(ZooKeeper's metrics provider cannot run here: its jar is in the official
image's distribution, not in Debian's zookeeper nor pyspark's jars, and the
network reaches no Maven repository; so its settings are checked, not
scraped. The brokers' metrics are scraped by a real Prometheus in
tests/integration/test_metrics.py.)"""

import pathlib
import re
import subprocess
import sys

import pytest
import yaml

from duomq.common.config import BrokerConfig
from duomq.testing.k8s import (
    OVERLAYS,
    ingress_allowed,
    named,
    of_kind,
    prod_with,
    render,
    selects,
    workloads,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus"
PROMETHEUS = ("monitoring", {"app.kubernetes.io/name": "prometheus"},
              {"kubernetes.io/metadata.name": "monitoring"})
STRANGER = ("monitoring", {"app": "grafana"}, {"kubernetes.io/metadata.name": "monitoring"})
# a pod of another namespace that labels itself prometheus (anyone may label a pod)
IMPOSTOR = ("tenant-a", {"app.kubernetes.io/name": "prometheus"},
            {"kubernetes.io/metadata.name": "tenant-a"})
RELEASE = """namespace: duomq
patches:
  - target: {group: monitoring.coreos.com}
    patch: |-
      - {op: add, path: /metadata/labels/release, value: kube-prometheus-stack}
"""
ZK_PROVIDER = "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider"


def of_component(docs, name):
    return [(d, meta, spec) for d, meta, spec in workloads(docs)
            if meta["labels"].get("app.kubernetes.io/component") == name]


def sanitized(label: str) -> str:
    """A Kubernetes label as a Prometheus label name (labelmap and
    podTargetLabels both replace what is not [a-zA-Z0-9_] with _)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", label)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_brokers_expose_metrics_to_prometheus_and_only_to_it(overlay):
    docs = render(f"overlays/{overlay}")
    brokers = of_component(docs, "broker")
    assert brokers
    for doc, meta, spec in brokers:
        broker = next(c for c in spec["containers"] if c["name"] == "broker")
        port = next(p["containerPort"] for p in broker["ports"] if p["name"] == "metrics")
        assert port == BrokerConfig().metrics_port == 5557       # what the broker binds
        notes = meta.get("annotations", {})
        assert notes["prometheus.io/scrape"] == "true" and notes["prometheus.io/port"] == "5557"
        assert notes["prometheus.io/path"] == "/metrics"
        service = named(docs, "Service", doc["spec"]["serviceName"])
        assert {"name": "metrics", "port": 5557, "targetPort": "metrics"} in \
            service["spec"]["ports"]
        target = (doc["metadata"]["namespace"], meta["labels"], spec)
        assert ingress_allowed(docs, target, 5557, PROMETHEUS)
        assert not ingress_allowed(docs, target, 5557, STRANGER)
        assert not ingress_allowed(docs, target, 5557, IMPOSTOR)
        assert not ingress_allowed(docs, target, 10912, PROMETHEUS)   # nothing else


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_zookeeper_serves_its_own_metrics_to_prometheus_and_only_to_it(overlay):
    """Plain (dev) and TLS (prod, components/auth: it sets ZOO_CFG_EXTRA
    whole) alike: the provider on the port the pod declares, annotates and
    the policy admits."""
    docs = render(f"overlays/{overlay}")
    (zk_doc, meta, spec), = of_component(docs, "zookeeper")
    (zk,) = spec["containers"]
    env = {e["name"]: e.get("value") for e in zk["env"]}
    extra = dict(e.split("=", 1) for e in env["ZOO_CFG_EXTRA"].split())
    assert extra["metricsProvider.className"] == ZK_PROVIDER
    port = int(extra["metricsProvider.httpPort"])
    assert {"name": "metrics", "containerPort": port} in zk["ports"]
    notes = meta["annotations"]
    assert notes["prometheus.io/scrape"] == "true" and int(notes["prometheus.io/port"]) == port
    assert notes["prometheus.io/path"] == "/metrics"
    target = (zk_doc["metadata"]["namespace"], meta["labels"], spec)
    assert ingress_allowed(docs, target, port, PROMETHEUS)
    assert not ingress_allowed(docs, target, port, STRANGER)
    assert not ingress_allowed(docs, target, port, IMPOSTOR)
    assert not ingress_allowed(docs, target, 2888, PROMETHEUS)


def test_the_monitoring_components_render_and_take_a_release_label(tmp_path):
    """components/podmonitor and components/prometheusrule in a user's
    overlay, with the patch their kustomization.yaml shows for
    kube-prometheus-stack's `release:` selector, through the real kustomize."""
    docs = list(yaml.safe_load_all(prod_with(tmp_path, "podmonitor", "prometheusrule",
                                             extra=RELEASE)))
    monitors = {m["metadata"]["name"]: m for m in of_kind(docs, "PodMonitor")}
    assert set(monitors) == {"duomq-brokers", "duomq-zookeeper"}
    (rule,) = of_kind(docs, "PrometheusRule")
    for obj in (*monitors.values(), rule):
        assert obj["apiVersion"] == "monitoring.coreos.com/v1"
        assert obj["metadata"]["labels"]["release"] == "kube-prometheus-stack"
        assert obj["metadata"]["namespace"] == "duomq"
    for name, component in (("duomq-brokers", "broker"), ("duomq-zookeeper", "zookeeper")):
        spec = monitors[name]["spec"]
        (endpoint,) = spec["podMetricsEndpoints"]
        assert endpoint["port"] == "metrics" and endpoint["path"] == "/metrics"
        pods = [(meta, pod) for _d, meta, pod in workloads(docs)
                if selects(spec["selector"], meta["labels"])]
        assert pods and all(meta["labels"]["app.kubernetes.io/component"] == component
                            for meta, _pod in pods)
        for meta, pod in pods:
            assert any(p.get("name") == "metrics" for c in pod["containers"]
                       for p in c["ports"])
            # the labels the rules select on reach the targets
            for label in spec["podTargetLabels"]:
                assert label in meta["labels"]
            wanted = set(re.findall(r'(app_kubernetes_io_\w+)="(\w+)"',
                                    (RULES / "duomq-rules.yaml").read_text()))
            given = {(sanitized(k), meta["labels"][k]) for k in spec["podTargetLabels"]}
            names = {n for n, _v in wanted}
            assert names <= {n for n, _v in given}
            assert {(n, v) for n, v in wanted if v in ("duomq", component)} <= given


def test_the_prometheusrule_holds_the_plain_files_rules_and_they_pass_its_tests(tmp_path):
    p = subprocess.run([sys.executable, "scripts/prometheusrule.py", "--check"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    rule = yaml.safe_load((ROOT / "deploy" / "k8s" / "components" / "prometheusrule" /
                           "prometheusrule.yaml").read_text())
    plain = yaml.safe_load((RULES / "duomq-rules.yaml").read_text())
    assert rule["spec"]["groups"] == plain["groups"]
    # the operator loads spec as a rules file: the unit tests pass on it too
    (tmp_path / "duomq-rules.yaml").write_text(yaml.safe_dump(rule["spec"]))
    (tmp_path / "duomq-rules.test.yaml").write_text((RULES / "duomq-rules.test.yaml").read_text())
    p = subprocess.run(["promtool", "test", "rules", "duomq-rules.test.yaml"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr


def test_a_stale_prometheusrule_is_caught(tmp_path):
    tree = tmp_path / "repo"
    for rel in ("scripts/prometheusrule.py", "deploy/prometheus/duomq-rules.yaml",
                "deploy/k8s/components/prometheusrule/prometheusrule.yaml"):
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text((ROOT / rel).read_text())
    rules = tree / "deploy/prometheus/duomq-rules.yaml"
    rules.write_text(rules.read_text().replace("for: 10m", "for: 20m", 1))
    p = subprocess.run([sys.executable, "scripts/prometheusrule.py", "--check"], cwd=tree,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "not up to date" in p.stderr


def test_a_secured_clusters_podmonitor_carries_the_token_and_nothing_else(tmp_path):
    """components/podmonitor-secured: the brokers' PodMonitor scrapes with
    the metrics token from a Secret of its own (Prometheus never reads the
    brokers' keys); ZooKeeper's is left as it is."""
    docs = list(yaml.safe_load_all(prod_with(tmp_path, "podmonitor", "podmonitor-secured")))
    monitors = {m["metadata"]["name"]: m for m in of_kind(docs, "PodMonitor")}
    (brokers,) = monitors["duomq-brokers"]["spec"]["podMetricsEndpoints"]
    assert brokers["authorization"] == {"type": "Bearer", "credentials": {
        "name": "duomq-metrics", "key": "metrics.token"}}
    (zk,) = monitors["duomq-zookeeper"]["spec"]["podMetricsEndpoints"]
    assert "authorization" not in zk
    assert "duomq-credentials" not in yaml.safe_dump(monitors)
