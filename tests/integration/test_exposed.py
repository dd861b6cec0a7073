"""A broker without auth that any host may reach says so: a warning at
start and a line in `duomq status`; one on loopback says nothing."""

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
                                       advertised_host="127.0.0.1")
    local_cluster.add_broker("broker-b", 0)                # loopback only
    assert "serves without auth on 0.0.0.0" in exposed.log_tail(50)
    assert "serves without auth" not in local_cluster.brokers[1].log_tail(50)
    out = run_cli("status", "--zookeeper", local_cluster.zookeeper, "--cluster",
                  local_cluster.cluster).stdout
    warned = [line for line in out.splitlines() if "serves without auth" in line]
    assert len(warned) == 1 and warned[0].startswith("broker-a/0: insecure:"), out
