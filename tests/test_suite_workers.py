"""make test's two pytest workers (scripts/test.sh: pytest-xdist,
``--dist loadgroup``): the tests of one group (testing/pytest_plugin.py's
WORKER_GROUPS, the images' tests) must run on one worker, or two of them
build the images and start a prod cluster each, at once. A pytest or
pytest-xdist that stops grouping (pytest 9.2 with xdist 3.8 grouped
nothing, silently) fails here, not as a container test's odd failure."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

CONFTEST = '''
import os
import time

import pytest

from duomq.testing.pytest_plugin import pytest_collection_modifyitems  # noqa: F401


@pytest.fixture(scope="session")
def images():
    with open(os.environ["SETUPS"], "a") as f:
        f.write(f"{os.environ['PYTEST_XDIST_WORKER']}\\n")
    time.sleep(0.5)
'''

GROUPED = '''
import time


def test_1(images):
    time.sleep(0.2)


def test_2(images):
    time.sleep(0.2)
'''


def test_a_group_runs_on_one_worker(tmp_path):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    for name in ("a", "b", "c"):
        (tmp_path / f"test_grouped_{name}.py").write_text(GROUPED)
    for i in range(6):
        (tmp_path / f"test_free_{i}.py").write_text(textwrap.dedent(
            "import time\n\n\ndef test_free():\n    time.sleep(0.2)\n"))
    setups = tmp_path / "setups"
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2",
                        "--dist", "loadgroup", "-v", "-o", "addopts=", str(tmp_path)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "SETUPS": str(setups)})
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    workers = {line.split("]")[0].lstrip("[") for line in p.stdout.splitlines()
               if " PASSED " in line and "test_grouped_" in line}
    every = {line.split("]")[0].lstrip("[") for line in p.stdout.splitlines()
             if " PASSED " in line}
    assert every == {"gw0", "gw1"}, p.stdout         # both workers ran tests
    assert len(workers) == 1, p.stdout               # the group's all on one
    assert len(setups.read_text().split()) == 1, setups.read_text()
