"""Readiness of a broker (pure) and a pod's identity from its name."""

import pytest

from duomq.broker.health import BrokerHealth, readiness
from duomq.common.config import BrokerConfig, parse_pod_name
from duomq.common.errors import ConfigError

GAP, QUIET = 1000, 20.0


def health(**kw):
    base = dict(role="SLAVE", following=True, lease_valid=False, acks_without_lease=False,
                draining=False, epoch=3, lag_bytes=0, master_silent_s=0.5)
    return BrokerHealth(**{**base, **kw})


@pytest.mark.parametrize("kw, ready, why", [
    (dict(role="MASTER", lease_valid=True), True, "master at epoch 3"),
    (dict(role="MASTER", lease_valid=False), False, "lease lapsed"),
    (dict(role="MASTER", lease_valid=False, acks_without_lease=True), True,
     "acking what every slave of its in-sync set holds"),
    (dict(role="MASTER", lease_valid=True, draining=True), False, "handing over"),
    (dict(following=False), False, "no role yet"),
    (dict(master_silent_s=-1), False, "not heard from its master yet"),
    (dict(master_silent_s=QUIET + 0.1), False, "silent for 20.1 s"),
    (dict(lag_bytes=GAP + 1), False, "1001 bytes behind its master (in sync within 1000)"),
    (dict(lag_bytes=GAP), True, "1000 bytes behind"),
])
def test_readiness(kw, ready, why):
    ok, reason = readiness(health(**kw), GAP, QUIET)
    assert ok is ready and why in reason


def test_pod_name_gives_group_and_broker_id():
    assert parse_pod_name("broker-a-1") == ("broker-a", 1)
    assert parse_pod_name("orders-12") == ("orders", 12)
    for bad in ("broker", "broker-", "-1", "broker-a-x"):
        with pytest.raises(ConfigError, match="not <statefulset>-<ordinal>"):
            parse_pod_name(bad)
    cfg = BrokerConfig.load(env={"DUOMQ_POD_NAME": "broker-b-1"})
    assert (cfg.group, cfg.broker_id) == ("broker-b", 1)
    same = BrokerConfig.load(env={"DUOMQ_POD_NAME": "broker-b-1", "DUOMQ_GROUP": "broker-b"})
    assert same.group == "broker-b"
    with pytest.raises(ConfigError, match="broker_id 0 contradicts pod_name"):
        BrokerConfig.load(env={"DUOMQ_POD_NAME": "broker-b-1"}, overrides={"broker_id": 0})


def test_listening_everywhere_needs_an_advertised_address():
    with pytest.raises(ConfigError, match="set advertised_host"):
        BrokerConfig.load(env={"DUOMQ_LISTEN_HOST": "0.0.0.0"})
    cfg = BrokerConfig.load(env={"DUOMQ_LISTEN_HOST": "0.0.0.0", "DUOMQ_ALLOW_INSECURE": "true",
                                 "DUOMQ_ADVERTISED_HOST": "broker-a-0.broker-a"})
    assert cfg.address == "tcp://broker-a-0.broker-a:10911"
