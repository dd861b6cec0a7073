"""The alert rules shipped in deploy/prometheus, through Debian's real
promtool (installed by make install): they parse, each alert fires (or stays
quiet) as its unit tests say on synthetic series, for both ways Kubernetes
targets are discovered (pod annotations and the PodMonitor) and a static
job; the unit tests catch the rules' likely mistakes; the PrometheusRule
component holds the same groups."""

import concurrent.futures
import os
import pathlib
import subprocess

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus"
COMPONENT = ROOT / "deploy" / "k8s" / "components" / "prometheusrule" / "prometheusrule.yaml"


def promtool(*args, cwd=RULES):
    return subprocess.run(["promtool", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60)


def alerts(text: str) -> set[str]:
    return {line.split("alert:")[1].strip() for line in text.splitlines() if "- alert:" in line}


def test_the_rules_parse():
    p = promtool("check", "rules", "duomq-rules.yaml")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SUCCESS: 20 rules found" in p.stdout


def test_every_alert_fires_as_its_unit_tests_say():
    p = promtool("test", "rules", "duomq-rules.test.yaml")
    assert p.returncode == 0, p.stdout + p.stderr
    tested = {line.split("alertname:")[1].strip() for line in
              (RULES / "duomq-rules.test.yaml").read_text().splitlines() if "alertname:" in line}
    assert tested == alerts((RULES / "duomq-rules.yaml").read_text())   # none untested
    # each alert is seen firing somewhere, not only staying quiet
    tests = yaml.safe_load((RULES / "duomq-rules.test.yaml").read_text())["tests"]
    fired = {t["alertname"] for block in tests for t in block["alert_rule_test"]
             if t["exp_alerts"]}
    assert fired == tested


def test_the_issue_43_alerts_are_there():
    assert {"DuomqBrokerDown", "DuomqBrokersAbsent", "DuomqGroupDegraded", "DuomqGroupDown",
            "DuomqNoInSyncSlave", "DuomqReplicationLagHigh", "DuomqSlaveNotCaughtUp",
            "DuomqConsumerLagGrowing", "DuomqSparkJobFailed", "DuomqSparkJobStale",
            "DuomqVolumeFillingUp", "DuomqVolumeAlmostFull", "DuomqZooKeeperDown",
            "DuomqZooKeeperQuorumLost"} <= alerts((RULES / "duomq-rules.yaml").read_text())


MISTAKES = [
    # the rule before issue 43: only jobs named duomq*, never the annotation
    # job, and the PodMonitor's only in namespaces named duomq*
    ('up{app_kubernetes_io_name="duomq", app_kubernetes_io_component="broker"} == 0\n'
     '          or up{job="duomq"} == 0', 'up{job=~"duomq.*"} == 0'),
    # absent()'s labels never match the other absent()'s: never fires
    ("and on() absent(", "and absent("),
    # two of three ZooKeeper servers ready is a quorum
    ('kube_statefulset_status_replicas_ready{statefulset="zk"}\n          <=',
     'kube_statefulset_status_replicas_ready{statefulset="zk"}\n          <'),
    # any failed Job, not only a Spark CronJob's
    ('owner_name=~"spark-.+"', 'owner_name=~".+"'),
    # a suspended CronJob is not stale
    ("and on(namespace, cronjob) kube_cronjob_spec_suspend == 0",
     "or on(namespace, cronjob) kube_cronjob_spec_suspend == 1"),
    # a slave that never caught up (-0.001) is out of sync too
    ("duomq_broker_info{role=\"SLAVE\"} < 0", "duomq_broker_info{role=\"SLAVE\"} < -1"),
    # someone else's claims
    ('persistentvolumeclaim=~"data-broker-.+|data-zk-.+|datalog-zk-.+|spark-.+"}\n'
     '          / kubelet_volume_stats_capacity_bytes{persistentvolumeclaim=~"data-broker-.+|'
     'data-zk-.+|datalog-zk-.+|spark-.+"} < 0.03',
     'persistentvolumeclaim=~".+"}\n          / kubelet_volume_stats_capacity_bytes'
     '{persistentvolumeclaim=~".+"} < 0.03'),
]


@pytest.fixture(scope="module")
def mutated(tmp_path_factory) -> list[tuple[int, subprocess.CompletedProcess]]:
    """Each mistake made in a copy of the rules, the copy checked and its
    unit tests run: side by side (promtool takes ~5 s of one CPU a run)."""
    text = (RULES / "duomq-rules.yaml").read_text()
    tests = (RULES / "duomq-rules.test.yaml").read_text()

    def run(mistake: tuple[str, str]) -> tuple[int, subprocess.CompletedProcess]:
        right, wrong = mistake
        assert text.count(right) == 1, right
        where = tmp_path_factory.mktemp("mistake")
        (where / "duomq-rules.yaml").write_text(text.replace(right, wrong))
        (where / "duomq-rules.test.yaml").write_text(tests)
        return (promtool("check", "rules", "duomq-rules.yaml", cwd=where).returncode,
                promtool("test", "rules", "duomq-rules.test.yaml", cwd=where))

    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        return list(pool.map(run, MISTAKES))


@pytest.mark.parametrize("which", range(len(MISTAKES)))
def test_the_unit_tests_catch_a_wrong_rule(mutated, which):
    checked, p = mutated[which]
    assert checked == 0, MISTAKES[which]         # it parses: only the unit tests can catch it
    assert p.returncode != 0, p.stdout


def test_a_broken_rule_is_caught(tmp_path):
    bad = (RULES / "duomq-rules.yaml").read_text().replace("changes(duomq_epoch[15m])",
                                                           "changes(duomq_epoch[15m]")
    (tmp_path / "duomq-rules.yaml").write_text(bad)
    p = promtool("check", "rules", "duomq-rules.yaml", cwd=tmp_path)
    assert p.returncode != 0
