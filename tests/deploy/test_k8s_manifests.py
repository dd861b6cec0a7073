"""deploy/k8s, checked offline: every directory rendered by the real
kustomize (`kubectl kustomize`, what `kubectl apply -k` applies), each
overlay validated by `kubernetes-validate --strict` and held to our
policies: what RocketMQ's charts and operator lack (disruption budgets,
required anti-affinity, probes, network policies) and what a broker pair
needs."""

import json
import os
import pathlib
import re
import shutil

import pytest
import yaml
from kubernetes_validate import utils as kv_utils
from packaging.version import Version

from duomq import __version__
from duomq.common.config import BrokerConfig, FlushDiskType, ReplicationMode
from duomq.common.grace import GRACE_ENV, MARGIN_S, STOP_S, handover_budget
from duomq.testing.k8s import (
    K8S,
    OVERLAYS,
    KustomizeError,
    component,
    container_env,
    containers,
    generated,
    ingress_allowed,
    kustomize,
    mounted_config,
    named,
    of_kind,
    pod_references,
    render,
    selects,
    strict_validate,
    workloads,
)

VERSIONS = sorted({v for v in kv_utils.all_versions() if Version(v) >= Version("1.29")},
                  key=Version)
PROBES = ("livenessProbe", "readinessProbe")
K8S_GROUPS = pathlib.Path(K8S) / "groups"
GROUPS = sorted(p.name for p in K8S_GROUPS.iterdir())
BUILDS = ["base", *(f"overlays/{o}" for o in OVERLAYS), *(f"groups/{g}" for g in GROUPS)]


@pytest.mark.parametrize("path", BUILDS)
def test_every_directory_builds_with_the_real_kustomize(path):
    docs = render(path)
    assert docs and all(d.get("kind") and d["metadata"].get("name") for d in docs)


def test_a_directory_that_does_not_build_fails_with_kustomizes_message(tmp_path):
    """The layout that hid the defect: the first group the template as is,
    the others copies renamed by JSON patches. The real kustomize refuses it
    and its message reaches the suite."""
    tree = tmp_path / "k8s"
    shutil.copytree(K8S, tree)
    first, *others = GROUPS
    (tree / "groups" / first / "kustomization.yaml").write_text(
        yaml.safe_dump({"resources": ["../../base/broker"]}))
    for group in others:
        rename = [{"op": "replace", "path": "/metadata/name", "value": group}]
        service = rename + [{"op": "replace", "path": "/spec/serviceName", "value": group}]
        patches = [{"target": {"kind": kind, "name": name}, "patch": yaml.safe_dump(ops)}
                   for kind, name, ops in (
                       ("Service", "broker", rename), ("PodDisruptionBudget", "broker", rename),
                       ("NetworkPolicy", "broker-replication", [{**rename[0], "value": group}]),
                       ("StatefulSet", "broker", service))]
        (tree / "groups" / group / "kustomization.yaml").write_text(yaml.safe_dump(
            {"resources": ["../../base/broker"], "patches": patches}))
    with pytest.raises(KustomizeError, match="found multiple possible referrals"):
        kustomize(str(tree / "overlays" / "prod"))


def test_versions_run_from_1_29_to_the_newest_bundled():
    assert VERSIONS[0] == "1.29.0" and Version(VERSIONS[-1]) >= Version("1.33")


@pytest.mark.parametrize("path", ["base", *(f"overlays/{o}" for o in OVERLAYS)])
def test_every_manifest_passes_strict_schema_validation(path, tmp_path):
    text = kustomize(os.path.join(K8S, path))
    n = len(render(path))
    assert n >= 12
    for version in VERSIONS:
        p = strict_validate(text, version, tmp_path)
        assert p.returncode == 0, f"{path} on {version}:\n{p.stdout}{p.stderr}"
        assert p.stdout.count(" passed for resource ") == n, p.stdout


def test_strict_validation_refuses_a_misspelled_field(tmp_path):
    text = kustomize(os.path.join(K8S, "overlays", "dev"))
    p = strict_validate(text.replace("livenessProbe:", "livenesProbe:", 1), VERSIONS[-1], tmp_path)
    assert p.returncode != 0 and "'livenesProbe' was unexpected" in p.stdout, p.stdout


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_statefulset_has_a_disruption_budget_that_selects_it(overlay):
    docs = render(f"overlays/{overlay}")
    for sts in of_kind(docs, "StatefulSet"):
        labels = sts["spec"]["template"]["metadata"]["labels"]
        assert selects(sts["spec"]["selector"], labels)
        pdbs = [p for p in of_kind(docs, "PodDisruptionBudget")
                if p["metadata"]["namespace"] == sts["metadata"]["namespace"]
                and selects(p["spec"]["selector"], labels)]
        assert len(pdbs) == 1, f"{sts['metadata']['name']}: {len(pdbs)} budgets select it"
        assert pdbs[0]["spec"].get("maxUnavailable") == 1, sts["metadata"]["name"]
        # and the budget covers nobody else's pods
        for other in of_kind(docs, "StatefulSet"):
            if other is not sts:
                assert not selects(pdbs[0]["spec"]["selector"],
                                   other["spec"]["template"]["metadata"]["labels"])


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_pairs_and_the_ensemble_have_required_anti_affinity(overlay):
    docs = render(f"overlays/{overlay}")
    for sts in of_kind(docs, "StatefulSet"):
        spec = sts["spec"]["template"]["spec"]
        labels = sts["spec"]["template"]["metadata"]["labels"]
        required = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert any(t["topologyKey"] == "kubernetes.io/hostname" and selects(t["labelSelector"], labels)
                   for t in required), f"{sts['metadata']['name']}: two pods may share a node"
        if component(sts) == "broker":
            assert sts["spec"]["replicas"] == 2
            assert sts["metadata"]["name"] == labels["duomq.io/group"]
            for other in of_kind(docs, "StatefulSet"):     # a pair only repels itself
                if other is not sts:
                    assert not any(selects(t["labelSelector"],
                                           other["spec"]["template"]["metadata"]["labels"])
                                   for t in required)


def test_prod_spreads_each_pair_over_zones():
    for sts in of_kind(render("overlays/prod"), "StatefulSet"):
        spread = sts["spec"]["template"]["spec"]["topologySpreadConstraints"]
        zone = [s for s in spread if s["topologyKey"] == "topology.kubernetes.io/zone"]
        assert zone and zone[0]["maxSkew"] == 1 and zone[0]["whenUnsatisfiable"] == "DoNotSchedule"
        if component(sts) == "broker":
            assert zone[0]["matchLabelKeys"] == ["duomq.io/group"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_has_probes_resources_and_a_pinned_image(overlay):
    docs = render(f"overlays/{overlay}")
    seen = 0
    for doc, spec, c in containers(docs):
        who = f"{doc['kind']}/{doc['metadata']['name']}/{c['name']}"
        init = c in spec.get("initContainers", [])      # runs to its end: no probes
        for probe in PROBES:
            assert init or c.get(probe), f"{who}: no {probe}"
        assert {"cpu", "memory"} <= set(c["resources"]["requests"]), f"{who}: requests"
        assert "memory" in c["resources"]["limits"], f"{who}: no memory limit"
        # no CPU limit where latency counts (CFS throttling): the brokers and
        # ZooKeeper; the batch job and init containers are held to theirs
        stateful = doc["kind"] == "StatefulSet" and not init
        assert ("cpu" in c["resources"]["limits"]) != stateful, f"{who}: cpu limit"
        image = c["image"]
        m = re.fullmatch(r"([\w./-]+):([\w.-]+)", image)
        assert m and m.group(2) != "latest" and re.search(r"\d", m.group(2)), \
            f"{who}: image {image} is not pinned to a version"
        if re.search(r"/duomq/duomq(-spark)?$", m.group(1)):
            assert m.group(2) == __version__, f"{who}: {image} is not duomq {__version__}"
        assert init or doc["kind"] != "StatefulSet" or c.get("startupProbe") or \
            c["livenessProbe"].get("initialDelaySeconds"), f"{who}: liveness from the first second"
        seen += 1
    assert seen >= 3


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_liveness_never_calls_zookeeper(overlay):
    docs = render(f"overlays/{overlay}")
    for doc, _, c in containers(docs):
        if component(doc) == "zookeeper":
            continue            # ZooKeeper's own liveness asks its own process
        for probe in ("livenessProbe", "startupProbe"):
            if probe not in c:
                continue
            command = " ".join(c[probe]["exec"]["command"])
            assert not re.search(r"zookeeper|\bzk\b|2181|--ready", command), command
        if component(doc) == "broker":
            assert c["livenessProbe"]["exec"]["command"] == ["duomq", "health", "--live"]
            assert c["readinessProbe"]["exec"]["command"] == ["duomq", "health", "--ready"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_brokers_hand_over_before_they_stop(overlay):
    for sts in of_kind(render(f"overlays/{overlay}"), "StatefulSet"):
        if component(sts) != "broker":
            continue
        spec = sts["spec"]["template"]["spec"]
        (c,) = spec["containers"]
        command = c["lifecycle"]["preStop"]["exec"]["command"]
        # its budget is derived from the grace period (common/grace.py), which
        # the pod is told as it is set
        assert command == ["duomq", "failover", "--step-down"]
        env = {e["name"]: e.get("value") for e in c["env"]}
        grace = spec["terminationGracePeriodSeconds"]
        assert float(env[GRACE_ENV]) == grace
        assert handover_budget(grace) + STOP_S + MARGIN_S <= grace


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_stores_are_on_persistent_volumes(overlay):
    docs = render(f"overlays/{overlay}")
    for doc, _, spec in workloads(docs):
        claims = {t["metadata"]["name"] for t in doc["spec"].get("volumeClaimTemplates", [])}
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for v in volumes.values():
            assert "hostPath" not in v, f"{doc['metadata']['name']}: hostPath volume"
            if "emptyDir" in v:
                assert v["emptyDir"].get("sizeLimit"), f"{v['name']}: unbounded emptyDir"
            if "persistentVolumeClaim" in v:
                named(docs, "PersistentVolumeClaim", v["persistentVolumeClaim"]["claimName"])
        for c in spec["containers"]:
            for m in c.get("volumeMounts", []):
                durable = m["name"] in claims or "persistentVolumeClaim" in volumes.get(m["name"], {})
                if component(doc) == "zookeeper" and m["mountPath"] in ("/data", "/datalog"):
                    assert durable, f"zookeeper {m['mountPath']} is not persistent"
                if m["mountPath"] in ("/state",):
                    assert durable, f"{doc['metadata']['name']}: {m['mountPath']} not persistent"
            if component(doc) == "broker":
                env = {e["name"]: e.get("value") for e in c["env"]}
                mount = next(m for m in c["volumeMounts"] if m["mountPath"] == env["DUOMQ_DATA_DIR"])
                assert mount["name"] in claims, "the broker's store must be on its claim"
        if doc["kind"] == "StatefulSet":       # deleting or scaling keeps the data
            assert claims and doc["spec"]["persistentVolumeClaimRetentionPolicy"] == \
                {"whenDeleted": "Retain", "whenScaled": "Retain"}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_zookeeper_ensemble_is_odd_and_consistent(overlay):
    docs = render(f"overlays/{overlay}")
    zk = named(docs, "StatefulSet", "zk")
    n = zk["spec"]["replicas"]
    assert n % 2 == 1 and zk["spec"]["podManagementPolicy"] == "Parallel"
    (c,) = zk["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    service = zk["spec"]["serviceName"]
    servers = env["ZOO_SERVERS"].split()
    tls = secured(docs)
    # secured: the plaintext port (the probes') on loopback alone
    plain = "127.0.0.1:2181" if tls else "2181"
    assert servers == [f"server.{i + 1}={zk['metadata']['name']}-{i}.{service}:2888:3888;{plain}"
                       for i in range(n)]
    extra = dict(e.split("=", 1) for e in env["ZOO_CFG_EXTRA"].split())
    assert extra["quorumListenOnAllIPs"] == "true"
    if tls:                                  # clients on TLS, the quorum on mutual TLS
        mount = next(m["mountPath"] for m in c["volumeMounts"] if m["name"] == "zookeeper-tls")
        assert extra["secureClientPort"] == "2182" and extra["sslQuorum"] == "true"
        assert extra["serverCnxnFactory"].endswith("NettyServerCnxnFactory")
        for store in ("ssl.keyStore", "ssl.quorum.keyStore"):
            assert extra[f"{store}.location"] == f"{mount}/server.pem"
            assert extra[f"{store}.type"] == "PEM"
        for store in ("ssl.trustStore", "ssl.quorum.trustStore"):
            assert extra[f"{store}.location"] == f"{mount}/ca.pem"
        volume = next(v for v in zk["spec"]["template"]["spec"]["volumes"]
                      if v["name"] == "zookeeper-tls")["secret"]
        assert volume["secretName"] == "duomq-zookeeper-tls" and \
            {i["key"] for i in volume["items"]} == {"zookeeper-server.pem", "zookeeper-ca.pem"}
        assert [p["containerPort"] for p in c["ports"]] == [2182, 2888, 3888, 7000]   # 7000: metrics
    else:
        assert not any(k.startswith("ssl") for k in extra)
    assert env["ZK_CLIENT_PORT"] == "2181"       # the probes' port, plaintext on both
    assert "ruok" in env["ZOO_4LW_COMMANDS_WHITELIST"] and "srvr" in env["ZOO_4LW_COMMANDS_WHITELIST"]
    assert " ".join(c["livenessProbe"]["exec"]["command"]).count("ruok") == 1
    assert " ".join(c["readinessProbe"]["exec"]["command"]).count("srvr") == 1
    script = c["args"][0]
    assert "ZOO_MY_ID=${HOSTNAME##*-}+1" in script, "myid from the ordinal"
    # every duomq process is told each server of the ensemble
    cluster = generated(docs, "ConfigMap", "duomq-cluster")["data"]
    assert cluster["DUOMQ_ZOOKEEPER"].split(",") == \
        [f"{zk['metadata']['name']}-{i}.{service}:{2182 if tls else 2181}" for i in range(n)]
    for svc in (named(docs, "Service", "zk"), named(docs, "Service", service)):
        assert [p["port"] for p in svc["spec"]["ports"] if p["port"] < 2888] == \
            [2182 if tls else 2181]


def secured(docs) -> bool:
    """Whether ``docs`` include components/auth (its brokers run with auth)."""
    return all({"name": "DUOMQ_AUTH", "value": "true"} in c.get("env", [])
               for _d, _p, c in containers(docs) if c["name"] == "broker")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_statefulsets_have_headless_services_that_publish_unready_pods(overlay):
    docs = render(f"overlays/{overlay}")
    for sts in of_kind(docs, "StatefulSet"):
        svc = named(docs, "Service", sts["spec"]["serviceName"])
        assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"]
        assert selects({"matchLabels": svc["spec"]["selector"]},
                       sts["spec"]["template"]["metadata"]["labels"])
        if component(sts) == "broker":            # one headless Service per group
            assert svc["metadata"]["name"] == sts["metadata"]["name"]


# Secrets the user creates as the auth component says (their values never
# enter the repository): a reference to one resolves when the steps name it
AUTH_STEPS = (pathlib.Path(K8S) / "components" / "auth" / "kustomization.yaml").read_text()
USER_SECRETS = set(re.findall(r"create secret generic ([a-z0-9-]+)", AUTH_STEPS))


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_reference_resolves(overlay):
    docs = render(f"overlays/{overlay}")
    assert USER_SECRETS == {"duomq-credentials", "duomq-zookeeper-tls", "duomq-spark-credentials",
                            "duomq-metrics"}
    for doc, _, spec in workloads(docs):
        for kind, holder, key in pod_references(spec):
            if kind == "Secret" and holder[key] in USER_SECRETS:
                continue
            if not holder.get("optional"):
                named(docs, kind, holder[key])
        for v in spec.get("volumes", []):
            if "configMap" in v or "secret" in v:
                continue
            assert {"emptyDir", "persistentVolumeClaim"} & set(v) or \
                v["name"] in {t["metadata"]["name"] for t in doc["spec"].get("volumeClaimTemplates", [])}
        for c in spec["containers"]:
            for m in c.get("volumeMounts", []):
                assert m["name"] in {v["name"] for v in spec.get("volumes", [])} | \
                    {t["metadata"]["name"] for t in doc["spec"].get("volumeClaimTemplates", [])}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_nothing_runs_as_root_or_keeps_capabilities(overlay):
    for _doc, pod, c in containers(render(f"overlays/{overlay}")):
        assert pod["securityContext"]["runAsNonRoot"] and pod["securityContext"]["runAsUser"] != 0
        assert pod["automountServiceAccountToken"] is False, "no pod needs the API server"
        assert c["securityContext"]["allowPrivilegeEscalation"] is False
        assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]


@pytest.mark.parametrize("overlay,groups,flush,replication", [
    ("dev", ["broker-a"], FlushDiskType.ASYNC_FLUSH, ReplicationMode.ASYNC),
    ("prod", ["broker-a", "broker-b", "broker-c"], FlushDiskType.SYNC_FLUSH,
     ReplicationMode.SYNC),
])
def test_each_broker_pod_reads_the_config_its_overlay_means(tmp_path, overlay, groups, flush,
                                                            replication):
    """The broker's own config loader, given what each pod would have: the
    mounted ConfigMap and the environment the kubelet builds."""
    docs = render(f"overlays/{overlay}")
    brokers = [s for s in of_kind(docs, "StatefulSet") if component(s) == "broker"]
    assert sorted(s["metadata"]["name"] for s in brokers) == groups
    namespace = brokers[0]["metadata"]["namespace"]
    for sts in brokers:
        spec = sts["spec"]["template"]["spec"]
        (c,) = spec["containers"]
        for ordinal in range(sts["spec"]["replicas"]):
            pod = f"{sts['metadata']['name']}-{ordinal}"
            env = container_env(docs, sts, c, pod)
            path = tmp_path / f"{pod}.toml"
            path.write_text(mounted_config(docs, spec, c, env["DUOMQ_CONFIG"]))
            cfg = BrokerConfig.load(str(path), env=env)
            assert (cfg.group, cfg.broker_id) == (sts["metadata"]["name"], ordinal)
            assert (cfg.flush, cfg.replication) == (flush, replication)
            assert cfg.slave_flush == flush
            assert cfg.cluster == f"duomq-{overlay}"
            assert cfg.zookeeper == env["DUOMQ_ZOOKEEPER"]
            assert cfg.advertised_host == f"{pod}.{sts['spec']['serviceName']}.{namespace}.svc"
            assert cfg.listen_host == "0.0.0.0" and cfg.local_address == "tcp://127.0.0.1:10911"
            ports = {p["name"]: p["containerPort"] for p in c["ports"]}
            assert (ports["client"], ports["ha"]) == (cfg.port, cfg.ha_port)


def test_groups_are_one_template_named():
    """A group directory is the template's name suffix and group label, and
    nothing else: no patches, no second copy of a broker group."""
    template = (K8S_GROUPS / "broker-a" / "kustomization.yaml").read_text()
    for group in GROUPS:
        text = (K8S_GROUPS / group / "kustomization.yaml").read_text()
        letter = group.rsplit("-", 1)[1]
        assert text == template.replace("broker-a", group).replace("nameSuffix: -a",
                                                                   f"nameSuffix: -{letter}")
        k = yaml.safe_load(text)
        assert set(k) == {"apiVersion", "kind", "resources", "nameSuffix", "labels"}
        docs = render(f"groups/{group}")
        assert {d["kind"] for d in docs} == {"Service", "StatefulSet", "PodDisruptionBudget",
                                             "NetworkPolicy"}
        for d in docs:
            assert d["metadata"]["name"].endswith(f"-{letter}")
            assert d["metadata"]["labels"]["duomq.io/group"] == group
        sts = named(docs, "StatefulSet", group)
        assert sts["spec"]["serviceName"] == group
        assert sts["spec"]["selector"]["matchLabels"]["duomq.io/group"] == group


def test_dev_and_prod_differ_where_they_mean_to():
    dev, prod = render("overlays/dev"), render("overlays/prod")
    assert named(dev, "StatefulSet", "zk")["spec"]["replicas"] == 1
    assert named(prod, "StatefulSet", "zk")["spec"]["replicas"] == 3
    assert {d["metadata"]["namespace"] for d in dev} == {"duomq-dev"}
    assert {d["metadata"]["namespace"] for d in prod} == {"duomq"}
    # a changed config changes the ConfigMap's name, so pods roll to it
    assert generated(dev, "ConfigMap", "duomq-config")["metadata"]["name"] != \
        generated(prod, "ConfigMap", "duomq-config")["metadata"]["name"]


def test_the_spark_job_reads_from_slaves_and_never_overlaps():
    docs = render("overlays/prod")
    job = named(docs, "CronJob", "spark-minutes")
    assert job["spec"]["concurrencyPolicy"] == "Forbid"
    (c,) = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert c["image"].startswith("registry.invalid/duomq/duomq-spark:")
    assert "--available-now" in c["args"] and "--checkpoint" in c["args"]
    env = container_env(docs, job, c, "spark-minutes-1")
    assert env["DUOMQ_CLUSTER"] == "duomq-prod" and "zk-0" in env["DUOMQ_ZOOKEEPER"]


def _pods(docs):
    """{workload name: (namespace, pod labels, pod spec)} of an overlay."""
    return {doc["metadata"]["name"]: (doc["metadata"]["namespace"], meta["labels"], spec)
            for doc, meta, spec in workloads(docs)}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_network_policies_admit_only_who_needs_each_port(overlay):
    docs = render(f"overlays/{overlay}")
    pods = _pods(docs)
    ns = next(iter(pods.values()))[0]

    def source(namespace, labels, named=False):
        return namespace, labels, {"kubernetes.io/metadata.name": namespace,
                                   **({"duomq.io/clients": "allowed"} if named else {})}

    inside = {name: source(ns, labels) for name, (_, labels, _) in pods.items()}
    client = {"app": "shop", "duomq.io/client": "true"}
    app = source("shop", client, named=True)       # a labelled client, in a named namespace
    strangers = [source("shop", {"app": "shop"}, named=True), source(ns, {"app": "debug"}),
                 source("elsewhere", client)]      # a namespace nobody named
    beside = source(ns, client)                    # a labelled client beside duomq
    groups = sorted(n for n in pods if n.startswith("broker-"))
    assert groups and "zk" in pods and "spark-minutes" in pods

    def allowed(target, port, who):
        return ingress_allowed(docs, pods[target], port, who)

    for group in groups:
        assert allowed(group, 10911, app), "clients reach the client port"
        assert allowed(group, 10911, beside)
        assert allowed(group, 10911, inside["spark-minutes"])
        for other in groups:
            assert allowed(group, 10911, inside[other])
            assert allowed(group, 10912, inside[other]) == (other == group), \
                f"{other} reaching {group}'s replication port"
        for who in [app, inside["zk"], inside["spark-minutes"], *strangers]:
            assert not allowed(group, 10912, who)
        for who in [inside["zk"], *strangers]:
            assert not allowed(group, 10911, who)
    client_port = 2182 if secured(docs) else 2181          # TLS on a secured cluster
    for who in [app, beside, *inside.values()]:
        assert allowed("zk", client_port, who)
        assert allowed("zk", 2181 + 2182 - client_port, who) is False
    for port in (2888, 3888):
        assert allowed("zk", port, inside["zk"])
        assert not any(allowed("zk", port, who) for who in [app, *strangers]
                       + [inside[g] for g in groups] + [inside["spark-minutes"]])
    assert not any(allowed("zk", client_port, who) for who in strangers)
    assert not any(allowed("spark-minutes", 4040, who) for who in [app, *inside.values()])


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_pod_is_isolated_by_some_policy(overlay):
    docs = render(f"overlays/{overlay}")
    for name, (ns, labels, _) in _pods(docs).items():
        assert any(p["metadata"]["namespace"] == ns and selects(p["spec"]["podSelector"], labels)
                   and "Ingress" in p["spec"]["policyTypes"]
                   for p in of_kind(docs, "NetworkPolicy")), f"{name} admits anyone"


def test_the_policy_reader_follows_kubernetes_rules():
    """ingress_allowed on small cases with known answers: an unselected pod
    admits all, a bare podSelector peer is the policy's namespace only,
    ports by name or number, rules are a union."""
    spec = {"containers": [{"ports": [{"name": "web", "containerPort": 80}]}]}
    target = ("a", {"app": "x"}, spec)
    peer = {"podSelector": {"matchLabels": {"role": "c"}}}
    policy = {"kind": "NetworkPolicy", "metadata": {"name": "p", "namespace": "a"},
              "spec": {"podSelector": {"matchLabels": {"app": "x"}}, "policyTypes": ["Ingress"],
                       "ingress": [{"ports": [{"port": "web"}], "from": [peer]}]}}
    same, other = ("a", {"role": "c"}, {}), ("b", {"role": "c"}, {})
    assert ingress_allowed([], target, 80, ("b", {}, {}))
    assert ingress_allowed([policy], target, 80, same)
    assert not ingress_allowed([policy], target, 80, other)
    assert not ingress_allowed([policy], target, 81, same)
    anywhere = {**peer, "namespaceSelector": {}}
    policy["spec"]["ingress"].append({"ports": [{"port": 81}], "from": [anywhere]})
    assert ingress_allowed([policy], target, 81, other)
    assert not ingress_allowed([policy], target, 80, other)
    policy["spec"]["ingress"] = []
    assert not ingress_allowed([policy], target, 80, same)


def test_prod_is_secured_every_broker_and_the_spark_job_and_dev_is_open(tmp_path):
    """The prod overlay includes components/auth; dev runs open, and says so
    (allow_insecure: a broker without auth beyond loopback refuses else)."""
    text = kustomize(os.path.join(K8S, "overlays", "prod"))
    docs = list(yaml.safe_load_all(text))
    # the placeholder is gone: `kubectl apply -k` must not empty the real Secret
    assert not of_kind(docs, "Secret")
    brokers = [(meta, spec) for _d, meta, spec in workloads(docs)
               if meta["labels"].get("app.kubernetes.io/component") == "broker"]
    assert len(brokers) == 3
    for _meta, spec in brokers:
        (broker,) = [c for c in spec["containers"] if c["name"] == "broker"]
        env = {e["name"]: e.get("value") for e in broker["env"]}
        assert env["DUOMQ_AUTH"] == "true" and env["DUOMQ_AUTH_DIR"] == "/var/run/secrets/duomq"
        mounts = {m["name"]: m["mountPath"] for m in broker["volumeMounts"]}
        assert mounts["credentials"] == env["DUOMQ_AUTH_DIR"]
        (vol,) = [v for v in spec["volumes"] if v["name"] == "credentials"]
        assert vol["secret"] == {"secretName": "duomq-credentials", "optional": False,
                                 "defaultMode": 0o440}
    (job,) = of_kind(docs, "CronJob")
    pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (minutes,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in minutes["env"]}
    assert env["DUOMQ_CREDENTIALS"] == "/var/run/secrets/duomq-spark/credentials.json"
    assert {"secretName": "duomq-spark-credentials", "defaultMode": 0o440} in \
        [v["secret"] for v in pod["volumes"] if "secret" in v]
    dev = render("overlays/dev")
    config = generated(dev, "ConfigMap", "duomq-config")["data"]["duomq.toml"]
    assert "allow_insecure = true" in config and "DUOMQ_AUTH" not in json.dumps(dev)
    assert "allow_insecure" not in generated(render("overlays/prod"), "ConfigMap",
                                             "duomq-config")["data"]["duomq.toml"]
    n = len(docs)
    for version in (VERSIONS[0], VERSIONS[-1]):
        p = strict_validate(text, version, tmp_path)
        assert p.returncode == 0, p.stdout + p.stderr
        assert p.stdout.count(" passed for resource ") == n, p.stdout
