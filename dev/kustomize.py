"""``kustomize build`` for the subset of kustomize that ``deploy/k8s`` uses,
in Python, for machines without the kustomize binary (this one, and CI):

    python -m duomq.dev.kustomize deploy/k8s/overlays/prod | kubectl apply -f -

Supported, with kustomize's semantics: ``resources`` (files and
directories), ``namespace``, ``configMapGenerator`` and ``secretGenerator``
(``literals`` and ``files``; ``behavior`` create, replace or merge; the
content-hash name suffix, computed as kustomize computes it, with every
reference in pod specs renamed to match) and ``patches`` (from a file or
inline; strategic merge or JSON 6902; a ``target`` by kind, name, namespace,
group, version and label selector, names as anchored regular expressions).
Any other field is refused rather than ignored, so a manifest never renders
differently here than under kustomize without saying so.

Needs PyYAML and jsonpatch (the ``test`` extra).
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import os
import re
import sys
from dataclasses import dataclass

import jsonpatch
import yaml

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
SUPPORTED = {"apiVersion", "kind", "resources", "namespace", "configMapGenerator",
             "secretGenerator", "patches"}
GENERATOR_FIELDS = {"name", "namespace", "behavior", "literals", "files", "type"}
PATCH_FIELDS = {"path", "patch", "target"}
TARGET_FIELDS = {"group", "version", "kind", "name", "namespace", "labelSelector"}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "PersistentVolume",
                  "StorageClass", "CustomResourceDefinition", "PriorityClass",
                  "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}
# kustomize's "legacy" output order: these kinds first, in this order
ORDER_FIRST = ["Namespace", "ResourceQuota", "StorageClass", "CustomResourceDefinition",
               "ServiceAccount", "PodSecurityPolicy", "Role", "ClusterRole", "RoleBinding",
               "ClusterRoleBinding", "ConfigMap", "Secret", "Endpoints", "Service",
               "LimitRange", "PriorityClass", "PersistentVolume", "PersistentVolumeClaim",
               "Deployment", "StatefulSet", "CronJob", "PodDisruptionBudget"]
ORDER_LAST = ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]
# strategic merge: lists merged item by item on this key (Kubernetes' patchMergeKey)
MERGE_KEYS = {"containers": "name", "initContainers": "name", "ephemeralContainers": "name",
              "env": "name", "volumes": "name", "volumeMounts": "mountPath",
              "imagePullSecrets": "name", "topologySpreadConstraints": "topologyKey"}


class KustomizeError(ValueError):
    pass


@dataclass
class Resource:
    doc: dict
    generated: bool = False        # by a generator: gets the content-hash suffix

    @property
    def kind(self) -> str:
        return self.doc.get("kind", "")

    @property
    def name(self) -> str:
        return self.doc.get("metadata", {}).get("name", "")

    @property
    def namespace(self) -> str:
        return self.doc.get("metadata", {}).get("namespace", "")

    @property
    def group_version(self) -> tuple[str, str]:
        group, _, version = self.doc.get("apiVersion", "").rpartition("/")
        return group, version

    def key(self) -> tuple[str, str, str, str]:
        return self.group_version[0], self.kind, self.namespace, self.name


# ---------------------------------------------------------------- building

def build(path: str) -> list[dict]:
    """The rendered documents of the kustomization in directory ``path``."""
    resources = _build(os.path.abspath(path), ())
    renames = {}
    for r in resources:
        if r.generated:
            new = f"{r.name}-{content_hash(r.doc)}"
            renames[(r.kind, r.namespace, r.name)] = new
            r.doc["metadata"]["name"] = new
    for r in resources:
        _rename_references(r, renames)
    return [r.doc for r in sorted(resources, key=_order)]


def _build(directory: str, seen: tuple[str, ...]) -> list[Resource]:
    if directory in seen:
        raise KustomizeError(f"{directory}: a cycle of kustomizations through {seen[-1]}")
    k = _load_kustomization(directory)
    out: list[Resource] = []
    for entry in k.get("resources") or []:
        target = os.path.normpath(os.path.join(directory, entry))
        if os.path.isdir(target):
            found = _build(target, seen + (directory,))
        elif os.path.isfile(target):
            found = [Resource(d) for d in _load_yaml(target)]
        else:
            raise KustomizeError(f"{directory}: resource {entry!r} does not exist")
        for r in found:
            _add(out, r, f"{directory}: resource {entry!r}")
    for kind, field in (("ConfigMap", "configMapGenerator"), ("Secret", "secretGenerator")):
        for spec in k.get(field) or []:
            _generate(out, kind, spec, directory)
    for spec in k.get("patches") or []:
        _patch(out, spec, directory)
    if k.get("namespace"):
        for r in out:
            if r.kind not in CLUSTER_SCOPED:
                r.doc.setdefault("metadata", {})["namespace"] = k["namespace"]
    return out


def _load_kustomization(directory: str) -> dict:
    for name in KUSTOMIZATION_FILES:
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            docs = _load_yaml(path)
            if len(docs) != 1 or not isinstance(docs[0], dict):
                raise KustomizeError(f"{path}: not one kustomization document")
            unknown = sorted(set(docs[0]) - SUPPORTED)
            if unknown:
                raise KustomizeError(f"{path}: {', '.join(unknown)} not supported by this "
                                     f"renderer (supported: {', '.join(sorted(SUPPORTED))})")
            return docs[0]
    raise KustomizeError(f"{directory}: no kustomization.yaml")


def _load_yaml(path: str) -> list:
    with open(path) as f:
        try:
            return [d for d in yaml.safe_load_all(f) if d is not None]
        except yaml.YAMLError as exc:
            raise KustomizeError(f"{path}: {exc}") from None


def _add(out: list[Resource], r: Resource, where: str) -> None:
    if not isinstance(r.doc, dict) or not r.kind or not r.name:
        raise KustomizeError(f"{where}: a document without kind or metadata.name")
    if any(o.key() == r.key() for o in out):
        raise KustomizeError(f"{where}: {r.kind} {r.name!r} is defined twice")
    out.append(r)


# ---------------------------------------------------------------- generators

def _generate(out: list[Resource], kind: str, spec: dict, directory: str) -> None:
    where = f"{directory}: {kind} generator {spec.get('name')!r}"
    unknown = sorted(set(spec) - GENERATOR_FIELDS)
    if unknown or not spec.get("name"):
        raise KustomizeError(f"{where}: needs a name; unsupported: {', '.join(unknown)}")
    data: dict[str, str] = {}
    for item in spec.get("literals") or []:
        key, sep, value = str(item).partition("=")
        if not sep or not key:
            raise KustomizeError(f"{where}: literal {item!r} is not KEY=VALUE")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]                         # KEY="a b", as kustomize reads it
        data[key] = value
    for item in spec.get("files") or []:
        key, sep, rel = str(item).partition("=")
        if not sep:
            key, rel = os.path.basename(item), item
        with open(os.path.join(directory, rel), encoding="utf-8") as f:
            text = f.read()
        if key in data:
            raise KustomizeError(f"{where}: key {key!r} given twice")
        data[key] = text
    if kind == "Secret":
        data = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    metadata = {"name": spec["name"]}
    if spec.get("namespace"):
        metadata["namespace"] = spec["namespace"]
    doc = {"apiVersion": "v1", "kind": kind, "metadata": metadata, "data": data}
    if kind == "Secret":
        doc["type"] = spec.get("type", "Opaque")
    new = Resource(doc, generated=True)
    behavior = spec.get("behavior", "create")
    existing = [r for r in out if r.key() == new.key()]
    if behavior == "create":
        _add(out, new, where)
    elif behavior not in ("replace", "merge"):
        raise KustomizeError(f"{where}: behavior {behavior!r} is not create, replace or merge")
    elif not existing:
        raise KustomizeError(f"{where}: behavior {behavior} but no {kind} "
                             f"{spec['name']!r} to {behavior}")
    else:
        old = existing[0]
        if behavior == "merge":
            old.doc["data"] = {**(old.doc.get("data") or {}), **data}
        else:
            old.doc["data"] = data
        old.generated = True


def content_hash(doc: dict) -> str:
    """kustomize's name suffix for a ConfigMap or Secret: the SHA-256 of its
    kind, name, data (and type) as Go's encoding/json writes them, 10 hex
    digits with 0, 1, 3, a and e swapped for letters."""
    encoded = {"kind": doc["kind"], "name": doc["metadata"]["name"],
               "data": doc.get("data") or {}}
    if doc["kind"] == "Secret":
        encoded["type"] = doc.get("type", "Opaque")
    if doc.get("binaryData"):
        encoded["binaryData"] = doc["binaryData"]
    text = json.dumps(encoded, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for char, esc in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"),
                      ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, esc)          # Go escapes these in JSON strings
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    return digest.translate(str.maketrans("013ae", "ghkmt"))


# ---------------------------------------------------------------- patches

def _patch(out: list[Resource], spec: dict, directory: str) -> None:
    unknown = sorted(set(spec) - PATCH_FIELDS)
    if unknown or ("path" in spec) == ("patch" in spec):
        raise KustomizeError(f"{directory}: a patch needs one of path or patch"
                             + (f"; unsupported: {', '.join(unknown)}" if unknown else ""))
    where = f"{directory}: patch {spec.get('path') or '(inline)'}"
    if "path" in spec:
        with open(os.path.join(directory, spec["path"])) as f:
            text = f.read()
    else:
        text = spec["patch"]
    try:
        body = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise KustomizeError(f"{where}: {exc}") from None
    target = spec.get("target")
    if isinstance(body, list):                          # JSON 6902
        if not target:
            raise KustomizeError(f"{where}: a JSON 6902 patch needs a target")
        ops = jsonpatch.JsonPatch(body)
        matched = _select(out, target, where)
        for r in matched:
            try:
                r.doc = ops.apply(r.doc)
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
                raise KustomizeError(f"{where} on {r.kind} {r.name!r}: {exc}") from None
        return
    if not isinstance(body, dict):
        raise KustomizeError(f"{where}: neither a strategic merge nor a JSON 6902 patch")
    if target:
        matched = _select(out, target, where)
    else:
        meta = body.get("metadata") or {}
        matched = [r for r in out if r.kind == body.get("kind") and r.name == meta.get("name")
                   and (not meta.get("namespace") or r.namespace == meta["namespace"])]
        if not matched:
            raise KustomizeError(f"{where}: no {body.get('kind')} {meta.get('name')!r} to patch")
    for r in matched:
        patch = copy.deepcopy(body)
        if target:          # the patch's own identity does not rename its targets
            patch.pop("apiVersion", None)
            patch.pop("kind", None)
            (patch.get("metadata") or {}).pop("name", None)
        strategic_merge(r.doc, patch)


def _select(out: list[Resource], target: dict, where: str) -> list[Resource]:
    unknown = sorted(set(target) - TARGET_FIELDS)
    if unknown:
        raise KustomizeError(f"{where}: target fields {', '.join(unknown)} not supported")
    labels = _parse_selector(target.get("labelSelector", ""), where)

    def full(pattern, value):
        return pattern is None or re.fullmatch(pattern, value) is not None

    matched = [r for r in out
               if full(target.get("kind"), r.kind) and full(target.get("name"), r.name)
               and full(target.get("namespace"), r.namespace)
               and full(target.get("group"), r.group_version[0])
               and full(target.get("version"), r.group_version[1])
               and all(r.doc.get("metadata", {}).get("labels", {}).get(k) == v
                       for k, v in labels.items())]
    if not matched:
        raise KustomizeError(f"{where}: target {target} matches no resource")
    return matched


def _parse_selector(text: str, where: str) -> dict[str, str]:
    out = {}
    for term in filter(None, (t.strip() for t in text.split(","))):
        key, sep, value = term.partition("=")
        if not sep or "!" in key or value.startswith("="):
            raise KustomizeError(f"{where}: label selector term {term!r}: only key=value "
                                 f"terms are supported")
        out[key.strip()] = value.strip()
    return out


def strategic_merge(doc: dict, patch: dict) -> dict:
    """Merge ``patch`` into ``doc`` in place, as a Kubernetes strategic merge
    patch: maps merge, ``null`` deletes a key, lists with a merge key (containers,
    env, volumes, ...) merge item by item (``$patch: delete`` removes one),
    other lists are replaced."""
    for key, value in patch.items():
        if value is None:
            doc.pop(key, None)
        elif isinstance(value, dict) and isinstance(doc.get(key), dict):
            strategic_merge(doc[key], value)
        elif isinstance(value, list) and key in MERGE_KEYS and isinstance(doc.get(key), list):
            _merge_list(doc[key], value, MERGE_KEYS[key])
        else:
            doc[key] = _without_directives(copy.deepcopy(value))
    return doc


def _merge_list(items: list, patch: list, merge_key: str) -> None:
    for p in patch:
        if not isinstance(p, dict) or merge_key not in p:
            raise KustomizeError(f"strategic merge: a list item without {merge_key!r}: {p!r}")
        same = [i for i in items if isinstance(i, dict) and i.get(merge_key) == p[merge_key]]
        if p.get("$patch") == "delete":
            for i in same:
                items.remove(i)
        elif same:
            strategic_merge(same[0], p)
        else:
            items.append(_without_directives(copy.deepcopy(p)))


def _without_directives(value):
    if isinstance(value, dict):
        return {k: _without_directives(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_without_directives(v) for v in value]
    return value


# ---------------------------------------------------------------- references

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


def pod_spec(doc: dict) -> dict | None:
    """The pod spec inside a workload, or None."""
    template = pod_template(doc)
    return template.get("spec") if template else None


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


def _rename_references(r: Resource, renames: dict) -> None:
    spec = pod_spec(r.doc)
    if spec is None:
        return
    for kind, holder, key in pod_references(spec):
        new = renames.get((kind, r.namespace, holder.get(key)))
        if new:
            holder[key] = new


def _order(r: Resource):
    if r.kind in ORDER_FIRST:
        rank = ORDER_FIRST.index(r.kind)
    elif r.kind in ORDER_LAST:
        rank = len(ORDER_FIRST) + 1 + ORDER_LAST.index(r.kind)
    else:
        rank = len(ORDER_FIRST)
    return rank, r.kind, r.namespace, r.name


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m duomq.dev.kustomize DIRECTORY", file=sys.stderr)
        return 2
    try:
        docs = build(args[0])
    except (KustomizeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(yaml.safe_dump_all(docs, sort_keys=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
