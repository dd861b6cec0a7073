"""The ZooKeeper CA's file for kazoo (common/zk_tls.ca_file) in a temp
directory other users share: a file planted at its name, a link, a copy
others may write, or another CA's, is never what the client trusts."""

from __future__ import annotations

import os
import stat
import tempfile

import pytest

from duomq.common import zk_tls

OURS = "-----BEGIN CERTIFICATE-----\nours\n-----END CERTIFICATE-----\n"
THEIRS = "-----BEGIN CERTIFICATE-----\ntheirs\n-----END CERTIFICATE-----\n"


@pytest.fixture
def shared_tmp(tmp_path, monkeypatch):
    """A sticky, world-writable temp directory, as /tmp."""
    tmp_path.chmod(0o1777)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(zk_tls, "_PRIVATE", {})
    return tmp_path


def name_of(pem: str) -> str:
    """The name ca_file gives a CA: found by writing it once elsewhere."""
    return os.path.basename(zk_tls.ca_file(pem))


def trusted(path: str) -> str:
    st = os.lstat(path)
    assert stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022
    with open(path) as f:
        return f.read()


def test_the_ca_is_written_once_and_found_again(shared_tmp):
    first = zk_tls.ca_file(OURS)
    assert trusted(first) == OURS and os.path.dirname(first) == str(shared_tmp)
    assert zk_tls.ca_file(OURS) == first
    assert zk_tls.ca_file(THEIRS) != first and trusted(zk_tls.ca_file(THEIRS)) == THEIRS


@pytest.mark.parametrize("plant", ["another CA", "a link to another CA", "writable by all",
                                   "a directory"])
def test_a_file_planted_at_the_name_is_not_trusted(shared_tmp, plant):
    name = shared_tmp / name_of(OURS)
    name.unlink()
    elsewhere = shared_tmp / "planted.pem"
    elsewhere.write_text(THEIRS)
    if plant == "another CA":
        name.write_text(THEIRS)
    elif plant == "a link to another CA":
        name.symlink_to(elsewhere)
    elif plant == "writable by all":
        name.write_text(OURS)
        name.chmod(0o666)
    else:
        name.mkdir()
    got = zk_tls.ca_file(OURS)
    assert trusted(got) == OURS
    assert elsewhere.read_text() == THEIRS          # the planted file is left as it was


@pytest.mark.skipif(os.getuid() != 0, reason="planting another user's file needs root")
def test_another_users_file_at_the_name_is_not_trusted(shared_tmp):
    """Another user's file at the name, holding this very CA: it could be
    rewritten after the check, so it is not used; the CA goes to a file of
    this user's own, and the same one is found next time."""
    name = shared_tmp / name_of(OURS)
    os.chown(name, 65534, 65534)                    # nobody's now
    got = zk_tls.ca_file(OURS)
    assert trusted(got) == OURS
    assert zk_tls.ca_file(OURS) == got
