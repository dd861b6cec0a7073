"""components/external-access, rendered by the real kustomize on the prod
overlay and validated strictly: every broker pod and ZooKeeper server has a
LoadBalancer of its own and a DNS name under the domain; each broker, read
by duomq's own config loader from the environment the kubelet builds,
publishes that name as its external address; outside addresses reach the
client and ZooKeeper TLS ports and nothing else. (Load balancers and DNS
cannot run here; the broker and client side of external addresses runs for
real in tests/integration/test_external_access.py.)"""

import shutil

import pytest
import yaml
from kubernetes_validate import utils as kv_utils
from packaging.version import Version

from duomq.common.config import BrokerConfig
from duomq.testing.k8s import (
    K8S,
    component,
    container_env,
    ingress_allowed,
    kustomize,
    mounted_config,
    of_kind,
    prod_with,
    selects,
    strict_validate,
)

NEWEST = max(kv_utils.all_versions(), key=Version)
OUTSIDE = "203.0.113.7"


def render(tmp_path, domain: str = "") -> tuple[str, list[dict]]:
    """Prod with the component, its domain set as its kustomization.yaml
    says (that line edited: a generator in the overlay that adds the
    component runs before it, and could not reach the annotations)."""
    tree = tmp_path / "k8s"
    shutil.copytree(K8S, tree)
    if domain:
        path = tree / "components" / "external-access" / "kustomization.yaml"
        text = path.read_text()
        assert text.count("=mq.example.invalid") == 1
        path.write_text(text.replace("=mq.example.invalid", f"={domain}"))
    overlay = tree / "overlays" / "outside"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "namespace: duomq\nresources: [../prod]\ncomponents: [../../components/external-access]\n")
    text = kustomize(str(overlay))
    return text, [d for d in yaml.safe_load_all(text) if d]


def pods(docs):
    """(StatefulSet, pod name, the pod's labels, its spec) of every pod."""
    for sts in of_kind(docs, "StatefulSet"):
        template = sts["spec"]["template"]
        for i in range(sts["spec"]["replicas"]):
            name = f"{sts['metadata']['name']}-{i}"
            labels = {**template["metadata"]["labels"],
                      "statefulset.kubernetes.io/pod-name": name}
            yield sts, name, labels, template["spec"]


def external_service(docs, labels) -> dict:
    (svc,) = [s for s in of_kind(docs, "Service") if s["spec"].get("type") == "LoadBalancer"
              and selects({"matchLabels": s["spec"]["selector"]}, labels)]
    return svc


@pytest.mark.parametrize("domain", ["", "mq.shop.example"])
def test_each_pod_has_a_load_balancer_and_each_broker_publishes_its_name(tmp_path, domain):
    text, docs = render(tmp_path, domain)
    domain = domain or "mq.example.invalid"
    seen = {"broker": 0, "zookeeper": 0}
    for sts, name, labels, spec in pods(docs):
        svc = external_service(docs, labels)
        host = svc["metadata"]["annotations"]["external-dns.alpha.kubernetes.io/hostname"]
        assert host == f"{name}.{domain}"
        (port,) = svc["spec"]["ports"]
        (c,) = spec["containers"]
        declared = {p.get("name"): p["containerPort"] for p in c["ports"]}
        target = declared.get(port["targetPort"], port["targetPort"])
        assert target in declared.values() and port["port"] == target
        seen[component(sts)] += 1
        if component(sts) == "broker":
            env = container_env(docs, sts, c, name)
            path = tmp_path / f"{name}.toml"
            path.write_text(mounted_config(docs, spec, c, env["DUOMQ_CONFIG"]))
            cfg = BrokerConfig.load(str(path), env=env)
            assert cfg.external_address == f"tcp://{host}:10911" == \
                f"tcp://{host}:{port['port']}"
            assert cfg.address != cfg.external_address       # inside clients: the pod's name
        else:
            assert target == 2182                           # TLS only from outside
    assert seen == {"broker": 6, "zookeeper": 3}
    p = strict_validate(text, NEWEST, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr


def test_outside_addresses_reach_the_client_and_zookeeper_tls_ports_only(tmp_path):
    _text, docs = render(tmp_path)
    for sts, _name, labels, spec in pods(docs):
        target = ("duomq", labels, spec)
        if component(sts) == "broker":
            assert ingress_allowed(docs, target, 10911, OUTSIDE)
            for port in (10912, 5557):                      # replication, metrics
                assert not ingress_allowed(docs, target, port, OUTSIDE)
        else:
            assert ingress_allowed(docs, target, 2182, OUTSIDE)
            for port in (2181, 2888, 3888, 7000):
                assert not ingress_allowed(docs, target, port, OUTSIDE)
    # without the component, nothing from outside
    base = [d for d in yaml.safe_load_all(prod_with(tmp_path / "plain")) if d]
    for _sts, _name, labels, spec in pods(base):
        for port in (10911, 2182):
            assert not ingress_allowed(base, ("duomq", labels, spec), port, OUTSIDE)
