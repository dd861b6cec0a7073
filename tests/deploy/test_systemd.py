"""deploy/systemd: the broker's unit passes `systemd-analyze verify`, the
example config is a valid broker config, and the unit's own command line,
with the paths an install chooses, starts a broker that registers in
ZooKeeper and stops within the unit's TimeoutStopSec on its KillSignal.

No systemd runs here (no init in this machine's containers): the unit is
verified offline and its ExecStart run as systemd would run it."""

import configparser
import os
import pathlib
import shlex
import shutil
import signal
import subprocess
import sys
import time

import pytest

from duomq.common.config import BrokerConfig
from duomq.testing.harness import member_node, wait_for

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
UNIT = ROOT / "deploy" / "systemd" / "duomq-broker@.service"
EXAMPLE = ROOT / "deploy" / "systemd" / "broker.toml"
PREFIX = str(pathlib.Path(sys.executable).parent.parent)    # the venv: /opt/duomq's stand-in


def unit() -> configparser.ConfigParser:
    parsed = configparser.ConfigParser(strict=False, interpolation=None)
    parsed.optionxform = str            # systemd keys are case-sensitive
    parsed.read(UNIT)
    return parsed


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_the_unit_verifies_with_no_warning(tmp_path):
    installed = tmp_path / "duomq-broker@.service"
    installed.write_text(UNIT.read_text().replace("/opt/duomq", PREFIX))
    p = subprocess.run(["systemd-analyze", "verify", str(tmp_path / "duomq-broker@broker-a-0.service")],
                       capture_output=True, text=True)
    assert p.returncode == 0 and not p.stderr.strip(), p.stderr
    service = unit()["Service"]
    assert service["KillSignal"] == "SIGTERM" and service["Restart"] == "on-failure"
    assert int(service["LimitNOFILE"]) >= 1 << 16


def test_the_example_config_is_a_broker_config():
    cfg = BrokerConfig.load(str(EXAMPLE), env={})
    assert (cfg.group, cfg.broker_id, cfg.listen_host, cfg.advertised_host) == \
        ("broker-a", 0, "0.0.0.0", "a0.example")
    assert cfg.auth and cfg.auth_dir == "/etc/duomq/auth" and not cfg.allow_insecure
    assert cfg.log_file.startswith("/var/log/duomq/") and cfg.data_dir.startswith("/var/lib/duomq/")


@pytest.mark.integration
def test_the_units_command_line_starts_a_broker_that_stops_on_its_kill_signal(zk_hosts,
                                                                             tmp_path):
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "broker-a-0.toml").write_text(
        f'cluster = "Units"\ngroup = "broker-a"\nbroker_id = 0\nzookeeper = "{zk_hosts}"\n'
        f'listen_host = "127.0.0.1"\nport = 0\nha_port = 0\nmetrics_port = 0\n'
        f'data_dir = "{tmp_path / "data"}"\nlog_file = "{tmp_path / "log" / "broker.log"}"\n'
        f'segment_size_bytes = 16777216\n')
    service = unit()["Service"]
    command = service["ExecStart"].replace("/opt/duomq", PREFIX).replace("/etc/duomq", str(etc))
    argv = shlex.split(command.replace("%i", "broker-a-0"))
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={k: v for k, v in os.environ.items() if not k.startswith("DUOMQ_")})
    try:
        wait_for(lambda: (m := member_node(zk_hosts, "Units", "broker-a", 0)) and m.is_master,
                 30, "the unit's broker to register and become master")
        assert "serving at" in (tmp_path / "log" / "broker.log").read_text()
        t0 = time.monotonic()
        proc.send_signal(getattr(signal, service["KillSignal"]))
        rc = proc.wait(int(service["TimeoutStopSec"]))
        assert rc == 0 and time.monotonic() - t0 < int(service["TimeoutStopSec"])
        assert "broker stopped" in (tmp_path / "log" / "broker.log").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
