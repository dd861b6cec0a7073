"""Credentials files: written owner-only, read back whole, and a broken one
refused with what is wrong (pure file I/O)."""

import json
import os

import pytest

from duomq.auth.credentials import (
    Credentials,
    init_cluster_keys,
    load_broker_keys,
    load_broker_trust,
    rotate_broker_keys,
)
from duomq.common.curve import KeyPair
from duomq.common.errors import ConfigError
from duomq.coordinator.zk_login import broker_zk_sasl, load_zk_sasl, user_zk_login


def test_init_writes_keys_and_an_admin_that_reads_back(tmp_path):
    path = init_cluster_keys(str(tmp_path / "k"))
    admin = Credentials.load(path)
    assert admin.user == "admin" and admin.zookeeper["digest"].startswith("duomq:")
    assert admin.broker_public_key == load_broker_keys(str(tmp_path / "k")).public
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    with pytest.raises(ConfigError, match="already has a broker keypair"):
        init_cluster_keys(str(tmp_path / "k"))


@pytest.mark.parametrize("change, error", [
    (lambda d: d.pop("secret_key"), "missing secret_key"),
    (lambda d: d.update(public_key="x" * 40), "public_key"),
    (lambda d: d.update(public_key=KeyPair.new().public.decode()), "does not belong"),
    (lambda d: d.update(user="../x"), "invalid"),
    (lambda d: d.update(zookeeper={"digest": "client:pw"}), "shared principal 'client'"),
    (lambda d: d.update(zookeeper={"digest": "nopassword"}), "zookeeper is not"),
    (lambda d: d.update(zookeeper="client:pw"), "zookeeper is not"),
    (lambda d: d.update(trusted_broker_keys="k"), "not a list"),
    (lambda d: d.update(trusted_broker_keys=["k"]), "trusted_broker_keys entry"),
    (lambda d: d["zookeeper"].update(sasl="nopassword"), "zookeeper.sasl: a ZooKeeper SASL"),
    (lambda d: d["zookeeper"].update(sasl=3), "zookeeper.sasl: a ZooKeeper SASL"),
])
def test_a_broken_file_is_refused_with_what_is_wrong(tmp_path, change, error):
    good = Credentials("alice", KeyPair.new(), KeyPair.new().public,
                       user_zk_login("alice"))
    doc = json.loads(good.to_json())
    change(doc)
    path = tmp_path / "c.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match=error):
        Credentials.load(str(path))


def test_a_sasl_login_is_written_for_the_brokers_and_the_admin(tmp_path):
    keys = str(tmp_path / "k")
    admin = Credentials.load(init_cluster_keys(keys, sasl_user="zkuser"))
    login = load_zk_sasl(os.path.join(keys, "zookeeper.sasl"))
    assert login.startswith("zkuser:") and len(login) > 30 and admin.zookeeper["sasl"] == login
    assert oct(os.stat(os.path.join(keys, "zookeeper.sasl")).st_mode & 0o777) == "0o600"
    assert broker_zk_sasl("", keys) == login                      # auth_dir's by default
    other = tmp_path / "other.sasl"
    other.write_text(" u:p w \n")
    assert broker_zk_sasl(str(other), keys) == "u:p w"            # the setting wins
    assert broker_zk_sasl("", str(tmp_path)) is None
    with pytest.raises(ConfigError, match="cannot read the ZooKeeper SASL login"):
        broker_zk_sasl(str(tmp_path / "missing"), "")
    with pytest.raises(ConfigError, match="--zookeeper-sasl"):
        init_cluster_keys(str(tmp_path / "k2"), sasl_user="bad user")


def test_trusted_broker_keys_read_back_the_main_one_first(tmp_path):
    main, other = KeyPair.new().public, KeyPair.new().public
    c = Credentials("alice", KeyPair.new(), main, None, (other, main))
    c.write(str(tmp_path / "c.json"))
    back = Credentials.load(str(tmp_path / "c.json"))
    assert back.broker_keys == (main, other) and back == Credentials("alice", c.keys, main,
                                                                     None, (other,))


def test_a_broker_key_rotation_step_by_step(tmp_path):
    d = str(tmp_path / "k")
    init_cluster_keys(d)
    old = load_broker_keys(d)
    with pytest.raises(ConfigError, match="broker-key new` first"):
        rotate_broker_keys(d, "promote")
    with pytest.raises(ConfigError, match="nothing to retire"):
        rotate_broker_keys(d, "retire")
    rotate_broker_keys(d, "new")
    with pytest.raises(ConfigError, match="under way"):
        rotate_broker_keys(d, "new")
    trusted = load_broker_trust(d)
    assert trusted[0] == old.public and len(trusted) == 2
    new_public = trusted[1]
    assert oct(os.stat(os.path.join(d, "broker-next.key_secret")).st_mode & 0o777) == "0o600"

    rotate_broker_keys(d, "promote")
    assert load_broker_keys(d).public == new_public
    assert load_broker_trust(d) == (new_public, old.public)
    assert sorted(os.listdir(d)) == ["admin-user.key", "admin.json", "broker-previous.key",
                                     "broker.key", "broker.key_secret", "metrics.token",
                                     "zookeeper.secret"]
    with pytest.raises(ConfigError, match="retire the previous rotation"):
        rotate_broker_keys(d, "new")

    rotate_broker_keys(d, "retire")
    assert load_broker_trust(d) == (new_public,)


def test_zookeeper_tls_keys_are_written_and_the_ca_travels_in_the_credentials(tmp_path):
    from duomq.common.zk_tls import ZK_CA, ZK_SERVER, load_ca
    keys = str(tmp_path / "k")
    admin = Credentials.load(init_cluster_keys(keys, zookeeper_tls=True,
                                               zookeeper_hosts=("zk.example", "10.0.0.1")))
    assert admin.zookeeper["tls_ca"] == load_ca(keys) and "BEGIN CERTIFICATE" in load_ca(keys)
    server = (tmp_path / "k" / ZK_SERVER).read_text()
    assert "PRIVATE KEY" in server and server.count("BEGIN CERTIFICATE") == 1
    assert oct(os.stat(tmp_path / "k" / ZK_SERVER).st_mode & 0o777) == "0o600"
    assert load_ca(str(tmp_path)) is None and (tmp_path / "k" / ZK_CA).exists()
    doc = json.loads(admin.to_json())
    doc["zookeeper"]["tls_ca"] = "not a certificate"
    (tmp_path / "c.json").write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match="tls_ca is not a PEM certificate"):
        Credentials.load(str(tmp_path / "c.json"))


@pytest.mark.parametrize("change, access", [
    (lambda d: None, "its own"),
    (lambda d: d.pop("zookeeper"), None),
    (lambda d: d.update(zookeeper={"digest": "client:pw"}), None),   # refused as the file is
    (lambda d: d.update(zookeeper={"digest": "nopassword"}), None),
    (lambda d: d["zookeeper"].update(sasl=3), None),
])
def test_the_zookeeper_access_of_the_credentials_variable_is_checked_as_the_file_is(
        tmp_path, monkeypatch, change, access):
    """``env_zk_access`` (coordinator.zk_login, below auth: the ZooKeeper
    connection reads it) takes the file's ``zookeeper`` field with the same
    checks ``Credentials.load`` makes, and None where those refuse it."""
    from duomq.coordinator.zk_login import env_zk_access
    good = Credentials("alice", KeyPair.new(), KeyPair.new().public, user_zk_login("alice"))
    doc = json.loads(good.to_json())
    change(doc)
    path = tmp_path / "c.json"
    path.write_text(json.dumps(doc))
    monkeypatch.setenv("DUOMQ_CREDENTIALS", str(path))
    got = env_zk_access()
    if access is None:
        assert got is None
    else:
        assert got == good.zookeeper and got["digest"].startswith("alice:")
    path.write_text("{not json")
    assert env_zk_access() is None
    monkeypatch.delenv("DUOMQ_CREDENTIALS")
    assert env_zk_access() is None
