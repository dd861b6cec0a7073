"""Credentials files: written owner-only, read back whole, and a broken one
refused with what is wrong (pure file I/O)."""

import json
import os

import pytest

from duomq.common.credentials import (
    Credentials,
    KeyPair,
    init_cluster_keys,
    load_broker_keys,
    zk_access_for_user,
)
from duomq.common.errors import ConfigError


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
    (lambda d: d.update(zookeeper={"digest": "client:pw"}), "admin_id"),
    (lambda d: d.update(zookeeper="client:pw"), "zookeeper is not"),
])
def test_a_broken_file_is_refused_with_what_is_wrong(tmp_path, change, error):
    good = Credentials("alice", KeyPair.new(), KeyPair.new().public,
                       zk_access_for_user("secret"))
    doc = json.loads(good.to_json())
    change(doc)
    path = tmp_path / "c.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match=error):
        Credentials.load(str(path))
