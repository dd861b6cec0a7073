"""A broker without auth that any host may reach refuses to start, unless
``allow_insecure`` says the network is trusted; then it says so: a warning
at start and a line in `duomq status`. One on loopback says nothing."""

import pytest

from duomq.common.endpoint import exposed_without_auth, is_loopback
from duomq.testing.harness import run_cli

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("host, loopback", [
    ("127.0.0.1", True), ("127.0.0.53", True), ("::1", True), ("localhost", True),
    ("0.0.0.0", False), ("::", False), ("10.0.0.7", False), ("broker-a-0.example", False),
])
def test_which_listen_hosts_stay_on_this_machine(host, loopback):
    assert is_loopback(host) is loopback
    assert exposed_without_auth(False, host) is not loopback
    assert not exposed_without_auth(True, host)
    assert not exposed_without_auth(False, "")          # an older broker: unknown


def test_an_open_broker_on_every_interface_says_so(local_cluster):
    exposed = local_cluster.add_broker("broker-a", 0, listen_host="0.0.0.0",
                                       advertised_host="127.0.0.1", allow_insecure=True)
    local_cluster.add_broker("broker-b", 0)                # loopback only
    assert "serves without auth on 0.0.0.0" in exposed.log_tail(50)
    assert "serves without auth" not in local_cluster.brokers[1].log_tail(50)
    out = run_cli("status", "--zookeeper", local_cluster.zookeeper, "--cluster",
                  local_cluster.cluster).stdout
    warned = [line for line in out.splitlines() if "serves without auth" in line]
    assert len(warned) == 1 and warned[0].startswith("broker-a/0: insecure:"), out


@pytest.mark.parametrize("host", ["0.0.0.0", "10.0.0.7"])
def test_an_open_broker_beyond_loopback_refuses_to_start(host):
    from duomq.common.config import BrokerConfig
    from duomq.common.errors import ConfigError
    with pytest.raises(ConfigError, match="set allow_insecure = true"):
        BrokerConfig(listen_host=host, advertised_host="b.example")
    BrokerConfig(listen_host=host, advertised_host="b.example", auth=True, auth_dir="/k")
    BrokerConfig(listen_host=host, advertised_host="b.example", allow_insecure=True)
    p = run_cli("broker", "--listen-host", host, "--zookeeper", "127.0.0.1:1", check=False,
                env={"DUOMQ_ADVERTISED_HOST": "b.example"})
    assert p.returncode == 2 and "allow_insecure" in p.stderr, p.stderr
