"""A broker's log_file: beside stderr, rotated at log_max_bytes, log_backups kept."""

import logging

import pytest

from duomq.cli.broker_cmd import setup_logging
from duomq.common.config import BrokerConfig
from duomq.common.errors import ConfigError


@pytest.fixture(autouse=True)
def restore_logging():
    root = logging.getLogger()
    before = (list(root.handlers), root.level)
    yield
    for h in root.handlers:
        if h not in before[0]:
            h.close()
    root.handlers[:], root.level = before


def test_the_log_file_is_rotated_and_its_backups_kept(tmp_path):
    path = tmp_path / "logs" / "broker.log"
    handlers = setup_logging(BrokerConfig(log_file=str(path), log_max_bytes=2000,
                                          log_backups=2), "INFO")
    assert len(handlers) == 2
    log = logging.getLogger("duomq.test")
    for i in range(200):
        log.info("line %03d of a broker that talks", i)
    names = sorted(p.name for p in path.parent.iterdir())
    assert names == ["broker.log", "broker.log.1", "broker.log.2"]
    assert all(p.stat().st_size <= 2000 for p in path.parent.iterdir())
    assert "line 199" in path.read_text()


def test_without_a_log_file_only_stderr_and_bad_settings_are_refused(tmp_path):
    assert len(setup_logging(BrokerConfig(), "WARNING")) == 1
    with pytest.raises(ConfigError, match="log_backups"):
        BrokerConfig(log_backups=-1)
    with pytest.raises(ConfigError, match="log_max_bytes"):
        BrokerConfig(log_max_bytes=0)
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="log_file"):
        setup_logging(BrokerConfig(log_file=str(tmp_path / "file" / "broker.log")), "INFO")
