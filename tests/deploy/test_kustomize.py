"""duomq.dev.kustomize, the Python stand-in for `kustomize build`: each
supported feature with kustomize's semantics, and refusals for the rest."""

import textwrap

import pytest
import yaml
from duomq.dev.kustomize import KustomizeError, build, content_hash, main, strategic_merge

DEPLOY = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web}}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: web
          image: web:1.0
          env: [{name: A, value: "1"}, {name: B, value: "2"}]
          envFrom: [{configMapRef: {name: settings}}]
          volumeMounts: [{name: conf, mountPath: /etc/web}]
        - name: sidecar
          image: side:1.0
      volumes: [{name: conf, configMap: {name: settings}}]
"""


def tree(root, files: dict):
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return str(root)


def kust(**fields):
    return yaml.safe_dump({"apiVersion": "kustomize.config.k8s.io/v1beta1",
                           "kind": "Kustomization", **fields})


def test_generators_hash_their_content_and_references_follow(tmp_path):
    root = tree(tmp_path, {
        "base/kustomization.yaml": kust(resources=["deploy.yaml"], configMapGenerator=[
            {"name": "settings", "literals": ["MODE=fast", "QUOTED='a b'"]}]),
        "base/deploy.yaml": DEPLOY,
        "over/kustomization.yaml": kust(resources=["../base"], namespace="shop",
                                        configMapGenerator=[{"name": "settings",
                                                             "behavior": "merge",
                                                             "files": ["app.conf"]}]),
        "over/app.conf": "x = 1\n",
    })
    docs = build(f"{root}/over")
    cm, dep = docs                               # ConfigMaps come first
    assert cm["data"] == {"MODE": "fast", "QUOTED": "a b", "app.conf": "x = 1\n"}
    name = cm["metadata"]["name"]
    assert name == "settings-" + content_hash({**cm, "metadata": {"name": "settings"}})
    spec = dep["spec"]["template"]["spec"]
    assert spec["volumes"][0]["configMap"]["name"] == name
    assert spec["containers"][0]["envFrom"][0]["configMapRef"]["name"] == name
    assert {d["metadata"]["namespace"] for d in docs} == {"shop"}
    # replace drops the base's data; a different content is a different name
    (tmp_path / "over/kustomization.yaml").write_text(kust(
        resources=["../base"], configMapGenerator=[{"name": "settings", "behavior": "replace",
                                                    "literals": ["MODE=safe"]}]))
    cm2 = build(f"{root}/over")[0]
    assert cm2["data"] == {"MODE": "safe"} and cm2["metadata"]["name"] != name


def test_the_hash_is_kustomizes_encoding():
    doc = {"kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "<&>"}}
    h = content_hash(doc)
    assert len(h) == 10 and not set(h) & set("013ae")
    assert h == content_hash({**doc, "data": {"a": "<&>"}})
    assert h != content_hash({**doc, "data": {"a": "<&> "}})
    secret = {"kind": "Secret", "metadata": {"name": "x"}, "data": {"a": "PCY+"}}
    assert content_hash(secret) != content_hash({**secret, "type": "kubernetes.io/tls"})


def test_strategic_merge_by_merge_key_and_directives():
    doc = yaml.safe_load(DEPLOY)
    strategic_merge(doc, yaml.safe_load("""
        metadata: {labels: {tier: front, app: null}}
        spec:
          template:
            spec:
              containers:
                - name: web
                  env: [{name: B, value: "3"}, {name: C, value: "4"}]
                - {name: sidecar, $patch: delete}
                - {name: new, image: new:2.0}
    """))
    assert doc["metadata"]["labels"] == {"tier": "front"}
    containers = doc["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["web", "new"]
    assert containers[0]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "3"},
                                    {"name": "C", "value": "4"}]
    assert containers[0]["image"] == "web:1.0"      # untouched fields stay


def test_patches_by_target_inline_and_from_files(tmp_path):
    root = tree(tmp_path, {
        "kustomization.yaml": kust(resources=["deploy.yaml"], configMapGenerator=[
            {"name": "settings", "literals": ["A=1"]}], patches=[
            {"target": {"kind": "Deployment", "name": "w.b"},
             "patch": "- {op: replace, path: /spec/template/spec/containers/0/image, "
                      "value: web:2.0}"},
            {"path": "more.yaml", "target": {"kind": "Deployment", "labelSelector": "app=web"}},
        ]),
        "deploy.yaml": DEPLOY,
        "more.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: other}\n"
                     "spec: {replicas: 3}\n",
    })
    (dep,) = [d for d in build(root) if d["kind"] == "Deployment"]
    assert dep["metadata"]["name"] == "web"           # the patch's name renames nothing
    assert dep["spec"]["replicas"] == 3
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == "web:2.0"


@pytest.mark.parametrize("files,match", [
    ({"kustomization.yaml": kust(resources=["d.yaml"], commonLabels={"a": "b"}),
      "d.yaml": DEPLOY}, "commonLabels not supported"),
    ({"kustomization.yaml": kust(resources=["d.yaml", "d2.yaml"]), "d.yaml": DEPLOY,
      "d2.yaml": DEPLOY}, "defined twice"),
    ({"kustomization.yaml": kust(resources=["missing.yaml"])}, "does not exist"),
    ({"kustomization.yaml": kust(resources=["d.yaml"], patches=[
        {"target": {"kind": "Service"}, "patch": "- {op: remove, path: /spec}"}]),
      "d.yaml": DEPLOY}, "matches no resource"),
    ({"kustomization.yaml": kust(resources=["d.yaml"], patches=[
        {"target": {"kind": "Deployment"}, "patch": "- {op: remove, path: /spec/nothing}"}]),
      "d.yaml": DEPLOY}, "on Deployment 'web'"),
    ({"kustomization.yaml": kust(resources=["d.yaml"], patches=[
        {"target": {"kind": "Deployment", "labelSelector": "app in (web)"},
         "patch": "- {op: remove, path: /spec}"}]), "d.yaml": DEPLOY}, "only key=value"),
    ({"kustomization.yaml": kust(configMapGenerator=[{"name": "x", "behavior": "merge",
                                                      "literals": ["A=1"]}])}, "no ConfigMap"),
    ({"kustomization.yaml": kust(configMapGenerator=[{"name": "x", "literals": ["A"]}])},
     "not KEY=VALUE"),
    ({"kustomization.yaml": kust(resources=["sub"]),
      "sub/kustomization.yaml": kust(resources=[".."])}, "cycle"),
    ({"other.yaml": DEPLOY}, "no kustomization.yaml"),
])
def test_refusals_name_the_problem(tmp_path, files, match):
    with pytest.raises(KustomizeError, match=match):
        build(tree(tmp_path, files))


def test_the_command_prints_yaml_or_an_error(tmp_path, capsys):
    root = tree(tmp_path, {"kustomization.yaml": kust(resources=["d.yaml"]), "d.yaml": DEPLOY})
    assert main([root]) == 0
    assert list(yaml.safe_load_all(capsys.readouterr().out))[0]["metadata"]["name"] == "web"
    assert main([str(tmp_path / "nowhere")]) == 1
    assert "no kustomization.yaml" in capsys.readouterr().err
