"""Every Python snippet of the documentation (docs/**/*.md) run as written
against a dev cluster (`duomq dev up --slaves 1 --proxy`: a master, a slave
and a proxy for the official RocketMQ 5 clients) with the
environment `duomq dev env` gives and the topics the page names: each exits
0 and prints what it should. README's snippet runs in its tour
(test_readme_tour.py). A new snippet needs a check here (the test fails on a
snippet it does not know)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

DOCS = Path(__file__).resolve().parents[2] / "docs"

# what a snippet prints, known by a line of it
CHECKS = {
    "with Producer() as producer:": ["SEND_OK", "b'order 42'"],
    'SimpleConsumer("workers"': ["b'job 0'", "b'job 4'"],
    "spark = local_session()": ["click 0"],
    'timers.recall("Orders"': ["due at 1", "recalled broker-"],
    'ClientConfiguration(os.environ["DUOMQ_PROXY"]': ["sent 01"],    # the official client
}


def snippets() -> list[tuple[str, str]]:
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        for code in re.findall(r"```python\n(.*?)```", page.read_text(), re.S):
            found.append((str(page.relative_to(DOCS)), code))
    return found


def duomq(*args: str, env: dict, input: str | None = None) -> str:
    p = subprocess.run([sys.executable, "-m", "duomq", *args], env=env, input=input, text=True,
                       capture_output=True, timeout=180)
    assert p.returncode == 0, f"duomq {' '.join(args)} -> {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p.stdout


def test_every_docs_snippet_runs_as_written_against_the_dev_cluster(zk_server, tmp_path):
    found = snippets()
    assert found, "no snippet found"
    unknown = [(page, code[:80]) for page, code in found
               if not any(key in code for key in CHECKS)]
    assert not unknown, f"snippets with no check here: {unknown}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUOMQ_")}
    env.update(PATH=f"{Path(sys.executable).parent}:{env['PATH']}", HOME=str(tmp_path),
               DUOMQ_DEV_DIR=str(tmp_path / "dev"))
    duomq("dev", "up", "--slaves", "1", "--proxy", "--zookeeper", zk_server.connect, "--cluster",
          f"Docs{os.getpid()}",
          env=env)
    try:
        for line in duomq("dev", "env", env=env).splitlines():      # eval "$(duomq dev env)"
            if line.startswith("export "):
                key, value = line[len("export "):].split("=", 1)
                env[key] = value
        for topic in ("Orders", "Jobs", "Clicks"):
            duomq("topic", "create", topic, "--queues", "2", env=env)
        duomq("produce", "Jobs", env=env, input="".join(f"job {i}\n" for i in range(5)))
        duomq("produce", "Clicks", "--tags", "click", env=env,
              input="".join(f"click {i}\n" for i in range(5)))
        for page, code in found:
            p = subprocess.run([sys.executable, "-c", code], env=env, text=True,
                               capture_output=True, timeout=300, cwd=tmp_path)
            assert p.returncode == 0, f"{page}:\n{code}\n-> {p.returncode}\n{p.stdout}\n{p.stderr}"
            want = next(v for key, v in CHECKS.items() if key in code)
            for text in want:
                assert text in p.stdout, f"{page}: {text!r} not printed by\n{code}\n{p.stdout}"
    finally:
        subprocess.run([sys.executable, "-m", "duomq", "dev", "down"], env=env,
                       capture_output=True, timeout=120)
