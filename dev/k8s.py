"""``deploy/k8s`` rendered and read as the kubelet and the scheduler would:
label selectors, a container's environment, the pod specs inside workloads.
The offline policy tests and the tests that run a manifest's commands against
real processes share it."""

from __future__ import annotations

import copy
import functools
import os
import re

from duomq.dev.kustomize import build, pod_template

K8S = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "deploy", "k8s")
OVERLAYS = ("dev", "prod")


@functools.cache
def _render(path: str) -> tuple:
    return tuple(build(os.path.join(K8S, path)))


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
    meta = pod_template(doc).get("metadata", {})
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
