"""The README's "Five minutes with the CLI" run as written, command by
command, against the dev cluster its first line starts (its own ZooKeeper,
a master and a slave), and its Python snippet against the same cluster: each
command exits 0 and says what the README says it does. A new line in the
tour needs a check here (the test fails on a command it does not know)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[2] / "README.md"


def tour() -> tuple[list[tuple[str, list[str]]], str]:
    """The tour's shell commands, each with the output lines its comments
    show (``#   ...``), and its Python snippet."""
    text = README.read_text()
    section = text[text.index("## Five minutes with the CLI"):]
    section = section[:section.index("\n## ", 5)]
    sh = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    py = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    commands: list[tuple[str, list[str]]] = []
    for raw in sh.splitlines():
        if raw.startswith("#   "):
            shown = re.sub(r"\s+\(.*\)$", "", raw[4:]).strip()
            if shown.startswith("broker-"):              # an output line, not prose
                commands[-1][1].append(shown)
            continue
        command = raw.split("  #")[0].strip()
        if command:
            commands.append((command, []))
    return commands, py


def roles(out: str) -> dict[str, str]:
    """``duomq status``'s table: GROUP/ID -> role."""
    found = {}
    for line in out.splitlines():
        cols = line.split()
        if len(cols) > 2 and cols[0].startswith("broker-") and cols[2] in ("MASTER", "SLAVE"):
            found[f"{cols[0]}/{cols[1]}"] = cols[2]
    return found


def message_lines(out: str) -> list[str]:
    return [x for x in out.splitlines() if re.match(r"broker-a:[0-9A-F]{24} broker-a/\d+@\d+ ", x)]


kills = []


def check(command: str, p: subprocess.CompletedProcess) -> None:
    out = p.stdout
    if command.startswith("duomq dev up"):
        assert roles(out) == {"broker-a/0": "MASTER", "broker-a/1": "SLAVE"}, out
    elif command.startswith("duomq topic create Orders --queues 4"):
        assert "topic Orders (4 queues" in out
    elif command.startswith("duomq produce Orders --count 100000"):
        assert "sent 100000 messages to Orders, 0 failed" in out, out
    elif command.startswith("duomq produce Orders"):
        assert out.count("SEND_OK") == 2
    elif command.startswith("duomq consume Orders --group billing --from first --count 5"):
        assert len(message_lines(out)) == 5 and "consumed 5 messages" in p.stderr
    elif command.startswith("duomq group describe billing"):
        committed = [int(line.split()[3]) for line in out.splitlines()
                     if line.startswith("Orders ")]
        assert len(committed) == 4 and sum(committed) == 5, out    # exactly five committed
    elif command.startswith("duomq consume Orders --queue broker-a/2 --offset 0 --count 3"):
        got = message_lines(out)
        assert [x.split()[1] for x in got] == ["broker-a/2@0", "broker-a/2@1", "broker-a/2@2"]
    elif command.startswith("duomq consume Orders --share workers"):
        assert len(message_lines(out)) == 3 and "consumed and acked 3 messages" in p.stderr
    elif command.startswith("duomq status"):
        want = {"broker-a/0": "MASTER", "broker-a/1": "SLAVE"} if not kills else \
            {"broker-a/1": "MASTER"}
        assert {k: v for k, v in roles(out).items() if k in want} == want, out
    elif command.startswith("duomq dev kill broker-a/0"):
        kills.append(command)
        assert "broker-a/1 is master at epoch 2" in out, out
    elif command.startswith("duomq dev start broker-a/0"):
        assert "broker=broker-a/0" in out
    elif command.startswith("duomq failover broker-a --to 0"):
        assert "handed over to broker 0" in out, out
    elif command.startswith("duomq group reset billing --topic Orders --to earliest --dry-run"):
        assert "dry run: nothing changed" in out
    elif command.startswith("duomq dev down"):
        assert "stopped: broker-a/0, broker-a/1, zookeeper" in out
    else:
        raise AssertionError(f"the tour's command {command!r} has no check in this test")


def test_the_readme_tour_runs_as_written(tmp_path):
    commands, snippet = tour()
    assert commands[0][0].startswith("duomq dev up") and commands[-1][0] == "duomq dev down"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUOMQ_")}
    env.update(PATH=f"{Path(sys.executable).parent}:{env['PATH']}", HOME=str(tmp_path),
               DUOMQ_DEV_DIR=str(tmp_path / "dev"))
    kills.clear()
    try:
        for command, shown in commands:
            if command == "duomq dev down":          # the Python snippet, on the same cluster
                p = subprocess.run([sys.executable, "-c", snippet], env=env, text=True,
                                   capture_output=True, timeout=120, cwd=tmp_path)
                assert p.returncode == 0, p.stdout + p.stderr
                first = p.stdout.splitlines()[0]
                assert first.startswith("SendStatus.SEND_OK broker-a:") or \
                    first.startswith("SEND_OK broker-a:"), p.stdout[:500]
                assert "b'third order'" in p.stdout
            if command.startswith("eval "):
                p = subprocess.run(["bash", "-c", command + " && env"], env=env, text=True,
                                   capture_output=True, timeout=60)
                assert p.returncode == 0, p.stderr
                env.update(dict(x.split("=", 1) for x in p.stdout.splitlines()
                                if x.startswith("DUOMQ_")))
                assert {"DUOMQ_ZOOKEEPER", "DUOMQ_CLUSTER"} <= set(env)
                continue
            p = subprocess.run(["bash", "-c", command], env=env, text=True,
                               capture_output=True, timeout=180, cwd=tmp_path)
            assert p.returncode == 0, f"{command} -> {p.returncode}\n{p.stdout}\n{p.stderr}"
            for line in shown:           # ids as the README shows them: any of that shape
                pattern = re.sub("[0-9A-F]{24}", "[0-9A-F]{24}", re.escape(line))
                assert re.search(pattern, p.stdout), f"{command}: {line!r} not in\n{p.stdout}"
            check(command, p)
    finally:
        subprocess.run([sys.executable, "-m", "duomq", "dev", "down"], env=env,
                       capture_output=True, timeout=120)


def test_the_readme_stays_short_and_starts_with_the_two_commands():
    """The README shows the two commands, the cluster, a short tour and
    links (under 250 lines); narratives and tables live in docs/."""
    text = README.read_text()
    assert len(text.splitlines()) < 250, len(text.splitlines())
    first = text.index("## ")
    assert text[first:].startswith("## The two commands")
    assert "make demo" in text and "make test" in text
