"""The alert rules shipped in deploy/prometheus, through Debian's real
promtool (installed by make install): they parse, and each alert fires (or stays quiet) as its unit
tests say on synthetic series."""

import pathlib
import subprocess

RULES = pathlib.Path(__file__).resolve().parents[2] / "deploy" / "prometheus"


def promtool(*args, cwd=RULES):
    return subprocess.run(["promtool", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60)


def test_the_rules_parse():
    p = promtool("check", "rules", "duomq-rules.yaml")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SUCCESS: 7 rules found" in p.stdout


def test_every_alert_fires_as_its_unit_tests_say():
    p = promtool("test", "rules", "duomq-rules.test.yaml")
    assert p.returncode == 0, p.stdout + p.stderr
    tested = {line.split("alertname:")[1].strip() for line in
              (RULES / "duomq-rules.test.yaml").read_text().splitlines() if "alertname:" in line}
    defined = {line.split("alert:")[1].strip() for line in
               (RULES / "duomq-rules.yaml").read_text().splitlines() if "- alert:" in line}
    assert tested == defined            # no alert without a test


def test_a_broken_rule_is_caught(tmp_path):
    bad = (RULES / "duomq-rules.yaml").read_text().replace("changes(duomq_epoch[15m])",
                                                           "changes(duomq_epoch[15m]")
    (tmp_path / "duomq-rules.yaml").write_text(bad)
    p = promtool("check", "rules", "duomq-rules.yaml", cwd=tmp_path)
    assert p.returncode != 0
