"""``deploy/k8s`` rendered by the real kustomize (``kubectl kustomize``, the
build ``kubectl apply -k`` applies) and read as the kubelet and the scheduler
would: label selectors, a container's environment, the pod specs inside
workloads. The offline policy tests and the tests that run a manifest's
commands, as processes or in containers, share it."""

from __future__ import annotations

import copy
import functools
import ipaddress
import os
import re
import shutil
import subprocess
import sys

import yaml

K8S = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "deploy", "k8s")
OVERLAYS = ("dev", "prod")
KUBECTL_MIN = (1, 27)        # kustomize v5 built in: `labels`, JSON patches by label


class KustomizeError(RuntimeError):
    """kubectl is missing or too old, or a directory does not build."""


@functools.cache
def kubectl() -> str:
    """The path of a kubectl new enough to build the manifests."""
    path = shutil.which("kubectl")
    if path is None:
        raise KustomizeError(f"kubectl {KUBECTL_MIN[0]}.{KUBECTL_MIN[1]} or newer is needed to "
                             "render deploy/k8s (its built-in kustomize); it is not on PATH")
    out = subprocess.run([path, "version", "--client"], capture_output=True, text=True,
                         timeout=30).stdout
    m = re.search(r"Client Version: v(\d+)\.(\d+)", out)
    if not m or (int(m.group(1)), int(m.group(2))) < KUBECTL_MIN:
        raise KustomizeError(f"kubectl {KUBECTL_MIN[0]}.{KUBECTL_MIN[1]} or newer is needed to "
                             f"render deploy/k8s; {path} says: {out.strip() or 'nothing'}")
    return path


def kustomize(directory: str) -> str:
    """``kubectl kustomize DIRECTORY``: the YAML stream, or KustomizeError
    with kustomize's own message."""
    p = subprocess.run([kubectl(), "kustomize", directory], capture_output=True, text=True,
                       timeout=120)
    if p.returncode != 0:
        raise KustomizeError(f"kubectl kustomize {directory} failed:\n{p.stderr.strip()}")
    return p.stdout


def prod_with(tmp_path, *components: str, extra: str = "") -> str:
    """The prod overlay with ``components/<component>`` each, as a user's
    own overlay adds them, rendered by the real kustomize (in a copy of
    ``deploy/k8s`` under ``tmp_path``); ``extra``: more of that overlay's
    kustomization.yaml (its patches, say)."""
    tree = os.path.join(tmp_path, "k8s")
    shutil.copytree(K8S, tree)
    overlay = os.path.join(tree, "overlays", "with-" + "-".join(components))
    os.mkdir(overlay)
    with open(os.path.join(overlay, "kustomization.yaml"), "w") as f:
        f.write("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
                "resources: [../prod]\ncomponents: ["
                + ", ".join(f"../../components/{c}" for c in components) + "]\n" + extra)
    return kustomize(overlay)


@functools.cache
def _render(path: str) -> tuple:
    return tuple(d for d in yaml.safe_load_all(kustomize(os.path.join(K8S, path))) if d)


def render(path: str) -> list[dict]:
    """The documents of ``deploy/k8s/<path>`` (a fresh copy each call)."""
    return copy.deepcopy(list(_render(path)))


def of_kind(docs, kind):
    return [d for d in docs if d["kind"] == kind]


def named(docs, kind, name):
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind} {name}: {len(found)} found"
    return found[0]


def generated(docs, kind, base_name):
    """A generated ConfigMap or Secret by its name before the hash suffix."""
    found = [d for d in docs if d["kind"] == kind
             and re.fullmatch(re.escape(base_name) + r"-[a-z0-9]{10}", d["metadata"]["name"])]
    assert len(found) == 1, f"{kind} {base_name}-<hash>: {len(found)} found"
    return found[0]


def workloads(docs):
    """(doc, pod template metadata, pod spec) of every workload."""
    for d in docs:
        template = pod_template(d)
        if template is not None:
            yield d, template.get("metadata", {}), template["spec"]


def strict_validate(text: str, version: str, tmp_path) -> subprocess.CompletedProcess:
    """The `kubernetes-validate --strict` command (unknown fields refused) on
    a YAML stream, as a user runs it on `kubectl kustomize`'s output."""
    path = os.path.join(tmp_path, f"rendered-{version}.yaml")
    with open(path, "w") as f:
        f.write(text)
    tool = os.path.join(os.path.dirname(sys.executable), "kubernetes-validate")
    return subprocess.run([tool, "--strict", "-k", version, path], capture_output=True,
                          text=True, timeout=120)


def containers(docs):
    """(doc, pod spec, container) of every container and init container."""
    for doc, _meta, spec in workloads(docs):
        for c in spec["containers"] + spec.get("initContainers", []):
            yield doc, spec, c


def pod_template(doc: dict) -> dict | None:
    """The pod template (``metadata`` and ``spec``) of a workload, or None."""
    kind, spec = doc.get("kind"), doc.get("spec") or {}
    if kind == "Pod":
        return doc
    if kind == "CronJob":
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    elif kind not in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"):
        return None
    return spec.get("template")


def pod_references(spec: dict):
    """(kind, holder dict, key) of every ConfigMap and Secret a pod spec names."""
    for v in spec.get("volumes") or []:
        if "configMap" in v:
            yield "ConfigMap", v["configMap"], "name"
        if "secret" in v:
            yield "Secret", v["secret"], "secretName"
        for source in (v.get("projected") or {}).get("sources") or []:
            for kind, field in (("ConfigMap", "configMap"), ("Secret", "secret")):
                if field in source:
                    yield kind, source[field], "name"
    for s in spec.get("imagePullSecrets") or []:
        yield "Secret", s, "name"
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        for e in c.get("envFrom") or []:
            if "configMapRef" in e:
                yield "ConfigMap", e["configMapRef"], "name"
            if "secretRef" in e:
                yield "Secret", e["secretRef"], "name"
        for e in c.get("env") or []:
            source = e.get("valueFrom") or {}
            if "configMapKeyRef" in source:
                yield "ConfigMap", source["configMapKeyRef"], "name"
            if "secretKeyRef" in source:
                yield "Secret", source["secretKeyRef"], "name"


def component(doc) -> str:
    return doc["metadata"]["labels"].get("app.kubernetes.io/component", "")


def selects(selector: dict, labels: dict) -> bool:
    """Whether a label selector (matchLabels and matchExpressions) matches."""
    if not selector:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        ok = {"In": labels.get(key) in values, "NotIn": labels.get(key) not in values,
              "Exists": key in labels, "DoesNotExist": key not in labels}[op]
        if not ok:
            return False
    return True


def expand(text: str, env: dict) -> str:
    """The kubelet's ``$(VAR)`` expansion: defined variables are replaced,
    ``$$`` is a literal ``$``, anything else stays as written."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)),
                  text)


def container_env(docs, doc, container, pod_name: str) -> dict:
    """A container's environment as the kubelet builds it for the pod
    ``pod_name`` of workload ``doc``: ``envFrom`` first, then ``env`` in order,
    each value expanded with the variables before it."""
    meta = (pod_template(doc) or {}).get("metadata", {})
    fields = {"metadata.name": pod_name, "metadata.namespace": doc["metadata"]["namespace"]}
    for k, v in (meta.get("labels") or {}).items():
        fields[f"metadata.labels['{k}']"] = v
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        ref = source["configMapRef"]["name"]
        env.update(named(docs, "ConfigMap", ref)["data"])
    for e in container.get("env") or []:
        if "value" in e:
            env[e["name"]] = expand(e["value"], env)
        elif "fieldRef" in e.get("valueFrom", {}):
            env[e["name"]] = fields[e["valueFrom"]["fieldRef"]["fieldPath"]]
        else:
            ref = e["valueFrom"]["configMapKeyRef"]
            env[e["name"]] = named(docs, "ConfigMap", ref["name"])["data"][ref["key"]]
    return env


def mounted_config(docs, spec, container, path: str) -> str:
    """The text a container reads at ``path`` from a mounted ConfigMap."""
    for m in container.get("volumeMounts") or []:
        if path.startswith(m["mountPath"].rstrip("/") + "/"):
            volume = next(v for v in spec["volumes"] if v["name"] == m["name"])
            cm = named(docs, "ConfigMap", volume["configMap"]["name"])
            return cm["data"][path[len(m["mountPath"].rstrip("/")) + 1:]]
    raise AssertionError(f"nothing is mounted at {path}")


def container_port(spec: dict, port) -> int | None:
    """The number of a pod's port given by number or by a container port's name."""
    if isinstance(port, int):
        return port
    for c in spec.get("containers") or []:
        for p in c.get("ports") or []:
            if p.get("name") == port:
                return p["containerPort"]
    return None


def ingress_allowed(docs, target: tuple[str, dict, dict], port: int,
                    source: tuple[str, dict, dict] | str) -> bool:
    """Whether NetworkPolicies let a TCP connection in to ``port`` of the
    ``target`` pod from the ``source`` pod, each given as (namespace, pod
    labels, namespace labels), or from ``source`` an address outside the
    cluster. Kubernetes' rules: a pod no Ingress policy selects admits
    everything; a selected pod admits what some rule of some policy
    selecting it allows (port and peer); a peer with a podSelector alone
    means the policy's own namespace; an outside address matches only an
    ipBlock holding it (and not its ``except``)."""
    t_ns, t_labels, t_pod_spec = target
    s_ns, s_labels, s_ns_labels = ("", {}, {}) if isinstance(source, str) else source
    outside = source if isinstance(source, str) else None
    policies = [p for p in of_kind(docs, "NetworkPolicy")
                if p["metadata"].get("namespace") == t_ns
                and "Ingress" in p["spec"].get("policyTypes", ["Ingress"])
                and (not p["spec"]["podSelector"] or selects(p["spec"]["podSelector"], t_labels))]
    if not policies:
        return True
    for policy in policies:
        for rule in policy["spec"].get("ingress") or []:
            ports = rule.get("ports")
            if ports and not any(p.get("protocol", "TCP") == "TCP"
                                 and container_port(t_pod_spec, p.get("port")) == port
                                 for p in ports):
                continue
            peers = rule.get("from")
            if not peers or any(_ip_matches(peer, outside) if outside is not None else
                                _peer_matches(peer, t_ns, s_ns, s_labels, s_ns_labels)
                                for peer in peers):
                return True
    return False


def _ip_matches(peer: dict, address: str) -> bool:
    block = peer.get("ipBlock")
    if block is None:
        return False
    ip = ipaddress.ip_address(address)
    return ip in ipaddress.ip_network(block["cidr"]) and \
        not any(ip in ipaddress.ip_network(e) for e in block.get("except") or [])


def _peer_matches(peer: dict, policy_ns: str, s_ns: str, s_labels: dict,
                  s_ns_labels: dict) -> bool:
    if "ipBlock" in peer:
        return False                 # pod-to-pod traffic is judged by the selectors
    if "namespaceSelector" in peer:
        ns_ok = peer["namespaceSelector"] == {} or selects(peer["namespaceSelector"], s_ns_labels)
    else:
        ns_ok = s_ns == policy_ns
    pod_ok = "podSelector" not in peer or peer["podSelector"] == {} or \
        selects(peer["podSelector"], s_labels)
    return ns_ok and pod_ok
