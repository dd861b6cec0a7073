"""The Dockerfile's policy and the non-editable install it performs. The
images themselves are built by `make image` and run in
test_containers.py."""

import os
import re
import subprocess
import sys
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_TOOLS = ("gcc", "g++", "build-essential", "make", "cmake", "python3-dev", "git")


def stages():
    """[(name, base, [instructions])] of the Dockerfile, ARGs resolved."""
    with open(os.path.join(ROOT, "Dockerfile")) as f:
        text = f.read().replace("\\\n", " ")
    args, out = {}, []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        word = word.upper()
        if word == "ARG" and not out:
            k, _, v = rest.partition("=")
            args[k] = v
        elif word == "FROM":
            base, _, name = rest.partition(" AS ")
            base = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], base.strip())
            out.append((name.strip(), base, []))
        else:
            out[-1][2].append((word, rest))
    return out


def test_final_stages_are_slim_unprivileged_and_pinned():
    st = stages()
    names = [n for n, _, _ in st]
    assert names[-1] == "broker", "the default (last) target is the broker"
    assert {"build", "spark", "broker"} <= set(names)
    for name, base, body in st:
        assert re.fullmatch(r"[\w./-]+:[\w.-]*\d[\w.-]*", base) and not base.endswith(":latest"), \
            f"stage {name}: base image {base} is not pinned to a version"
        if name.startswith("build"):
            continue
        runs = " ".join(rest for word, rest in body if word == "RUN")
        assert not any(re.search(rf"\b{re.escape(t)}\b", runs) for t in BUILD_TOOLS), \
            f"stage {name} installs build tools"
        users = [rest for word, rest in body if word == "USER"]
        assert users and users[-1].split(":")[0] not in ("0", "root"), f"stage {name} runs as root"
        assert any(word == "COPY" and "--from=build" in rest for word, rest in body)
    broker = dict((w, r) for w, r in st[-1][2])
    assert broker["ENTRYPOINT"] == '["duomq"]' and broker["CMD"] == '["broker"]'
    assert "health" in broker["HEALTHCHECK"] and "--live" in broker["HEALTHCHECK"]


def test_dockerignore_keeps_the_context_small():
    with open(os.path.join(ROOT, ".dockerignore")) as f:
        ignored = f.read().split()
    assert {".git", ".venv", "tests", "chaos_tests"} <= set(ignored)


@pytest.mark.integration
def test_the_image_install_builds_a_complete_wheel(tmp_path):
    """`pip install .`, as the image runs it, yields the whole package and
    nothing else at the top level."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                    str(tmp_path), ROOT], check=True, capture_output=True)
    (wheel,) = [f for f in os.listdir(tmp_path) if f.endswith(".whl")]
    with zipfile.ZipFile(tmp_path / wheel) as z:
        names = z.namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"duomq"}
    for module in ("duomq/cli/main.py", "duomq/cli/health_cmd.py", "duomq/broker/health.py",
                   "duomq/client/cluster/routes.py", "duomq/master/parts.py", "duomq/slave/parts.py",
                   "duomq/client/spark/arrow.py", "duomq/proto/duomq_pb2.py"):
        assert module in names
    assert not any(n.startswith(("duomq/tests/", "duomq/chaos_tests/", "duomq/testing/"))
                   for n in names), "the test harness is not installed"
