"""`duomq health` runs every few seconds in every broker pod: it loads only
what it needs (no ZooKeeper client, no producer or consumer), and the other
subcommands still load and parse as before."""

import subprocess
import sys

HEAVY = ("kazoo", "duomq.client.consumer.pull", "duomq.client.producer.producer", "duomq.coordinator.zk",
         "pyspark")


def run_python(code: str) -> str:
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def test_the_health_probe_loads_no_zookeeper_client():
    out = run_python(
        "import sys\nfrom duomq.cli.main import main\n"
        "rc = main(['health', '--live', '--address', 'tcp://127.0.0.1:9', '--timeout', '0.2'])\n"
        f"print(rc, [m for m in {HEAVY!r} if m in sys.modules])")
    assert out.splitlines()[-1] == "1 []"


def test_every_subcommand_is_still_there():
    from duomq.cli.main import COMMANDS, parser
    full = parser()
    for name in COMMANDS:
        assert parser(name).parse_args(_minimal(name)).command == name
        assert full.parse_args(_minimal(name)).command == name


def _minimal(name: str) -> list[str]:
    return {"topic": ["topic", "list"], "produce": ["produce", "T"],
            "consume": ["consume", "T", "--group", "g"], "health": ["health", "--live"],
            "dev": ["dev", "status"], "message": ["message", "get", "broker-a:" + "0" * 16],
            "dlq": ["dlq", "list", "--group", "g"],
            "group": ["group", "lag", "--group", "g"],
            "drill": ["drill", "run", "--scenario", "kill-master"],
            "auth": ["auth", "user", "list"], "tx": ["tx", "list"],
            "cluster": ["cluster", "remove-group", "broker-z"]}.get(name, [name])


def test_bodies_may_follow_options_and_strays_are_still_refused(capsys):
    import pytest

    from duomq.cli.main import parse
    args = parse(["produce", "T", "--quiet", "a", "b"])
    assert (args.topic, args.bodies, args.quiet) == ("T", ["a", "b"], True)
    assert parse(["produce", "T", "a", "--tag", "x", "b"]).bodies == ["a", "b"]
    for argv in (["produce", "T", "a", "--no-such-option"], ["topic", "list", "stray"]):
        with pytest.raises(SystemExit):
            parse(argv)
        assert "unrecognized arguments" in capsys.readouterr().err
