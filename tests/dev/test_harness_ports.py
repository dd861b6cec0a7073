"""A test's broker whose picked port another process binds first (two
workers' brokers starting at once met it in CI: "ha_port 24826: cannot
listen on 127.0.0.1: Address already in use") starts on other ports; a port
the test chose itself is not changed behind its back."""

import socket

import pytest

from duomq.testing.harness import BrokerProcess


def _hold(port: int) -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", port))
    s.listen(1)
    return s


def test_a_broker_whose_picked_port_was_taken_starts_on_others(local_cluster):
    b = BrokerProcess(local_cluster.zookeeper, local_cluster.cluster, "broker-a", 0,
                      f"{local_cluster.base_dir}/broker-a-0")
    local_cluster.brokers.append(b)
    taken = b.ha_port
    with _hold(taken):
        b.start()
        assert b.alive() and b.ha_port != taken
        with open(b.log_path) as f:
            assert f"ha_port {taken}: cannot listen" in f.read()


def test_a_port_the_test_chose_is_kept_and_the_failure_shown(local_cluster, tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        chosen = probe.getsockname()[1]
    with _hold(chosen):
        b = BrokerProcess(local_cluster.zookeeper, local_cluster.cluster, "broker-a", 0,
                          str(tmp_path / "b"), ha_port=chosen)
        local_cluster.brokers.append(b)
        with pytest.raises(RuntimeError, match=f"ha_port {chosen}: cannot listen"):
            b.start()
        assert b.ha_port == chosen
