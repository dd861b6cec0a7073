"""A broker that cannot start says why in one line naming the setting or the
file, and exits 2 (no traceback). Each of these fails before the broker dials
ZooKeeper, so the port given for it is never reached."""

import socket
import subprocess
import sys

import pytest


def start_broker(tmp_path, *args: str, config: str | None = None) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "duomq", "broker", "--zookeeper", "127.0.0.1:9",
            "--port", "0", "--set", "ha_port=0", "--set", "metrics_port=0", *args]
    if config is not None:
        path = tmp_path / "broker.toml"
        path.write_text(config)
        argv += ["--config", str(path)]
    if "--data-dir" not in args:
        argv += ["--data-dir", str(tmp_path / "data")]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def assert_refused(p: subprocess.CompletedProcess, message: str) -> None:
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("duomq: ") and message in last, p.stderr


@pytest.mark.parametrize("config,message", [
    ('[broker]\nzk_session_timeout_ms = "abc"\n',
     "zk_session_timeout_ms: 'abc' is not a valid int"),
    ("[broker]\nelection_settle_ms = -1\n", "election_settle_ms: must be >= 0, got -1"),
    ('[broker]\npromotable = "no"\n', "promotable: 'no' is not a valid bool"),
    ("[broker]\nflush_intervl_ms = 5\n", "unknown field(s) flush_intervl_ms"),
    ("[broker\n", "broker.toml: Expected ']' at the end of a table declaration"),
])
def test_a_bad_config_value_is_one_line_and_exit_2(tmp_path, config, message):
    assert_refused(start_broker(tmp_path, config=config), message)


def test_a_missing_config_file_is_named(tmp_path):
    p = subprocess.run([sys.executable, "-m", "duomq", "broker", "--config",
                        str(tmp_path / "none.toml")], capture_output=True, text=True, timeout=60)
    assert_refused(p, f"config file {tmp_path}/none.toml: [Errno 2] No such file or directory")


def test_a_bad_set_value_is_one_line_and_exit_2(tmp_path):
    assert_refused(start_broker(tmp_path, "--set", "promotable=maybe"),
                   "--set promotable: 'maybe' is not a valid bool (true or false)")


def test_an_unusable_data_dir_is_named(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert_refused(start_broker(tmp_path, "--data-dir", str(blocker / "data")),
                   f"{blocker}/data: Not a directory")


def test_a_damaged_offsets_file_is_named_and_kept(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    offsets = data / "consumer_offsets.json"
    offsets.write_text('{"offsets": {"g": {"t": {"0": 1')
    assert_refused(start_broker(tmp_path), f"consumer offsets file {offsets} is damaged")
    assert offsets.read_text() == '{"offsets": {"g": {"t": {"0": 1'


def test_a_port_in_use_is_named(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert_refused(start_broker(tmp_path, "--port", str(port)),
                       f"port {port}: cannot listen on 127.0.0.1: Address already in use")


def test_a_metrics_port_in_use_is_named(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert_refused(start_broker(tmp_path, "--set", f"metrics_port={port}"),
                       f"metrics_port {port}: cannot listen on 127.0.0.1: Address already in use")


def test_the_broker_raises_its_open_files_limit_to_the_hard_one():
    """Every consume-queue segment holds a descriptor: a broker must not stop
    at the usual soft limit of 1,024 (about 1,000 queues)."""
    import resource

    from duomq.broker.server import raise_open_files_limit
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))
        got = raise_open_files_limit()
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == got
        assert got == (hard if hard != resource.RLIM_INFINITY else 1 << 20)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
