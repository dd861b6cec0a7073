"""scripts/check_cycles.py, which scripts/lint.sh runs before the suite:
it finds a cycle however the modules import each other (at the top, under
TYPE_CHECKING, inside a function, through a third module), names a chain
around it, and passes a package without one."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import textwrap

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parent.parent / "scripts" / "check_cycles.py"


def package(tmp_path, files: dict[str, str]) -> None:
    root = tmp_path / "duomq"
    root.mkdir()
    (root / "__init__.py").write_text("")
    for name, text in files.items():
        (root / f"{name}.py").write_text(textwrap.dedent(text))


def check(tmp_path):
    return subprocess.run([sys.executable, str(SCRIPT)], cwd=tmp_path,
                          env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60)


CYCLES = {
    "at the top": {"a": "import duomq.b\n", "b": "from duomq import a\n"},
    "under TYPE_CHECKING": {
        "a": "from duomq.b import B\n",
        "b": """
             from typing import TYPE_CHECKING
             B = 1
             if TYPE_CHECKING:
                 from duomq.a import A
             """},
    "inside a function": {"a": "import duomq.b\n",
                          "b": "def f():\n    from duomq import a\n    return a\n"},
    "through a third": {"a": "import duomq.b\n", "b": "import duomq.c\n",
                        "c": "import duomq.a\n"},
}


@pytest.mark.parametrize("how", sorted(CYCLES))
def test_a_cycle_is_found_and_named(tmp_path, how):
    package(tmp_path, {**CYCLES[how], "alone": "import duomq.a\n"})
    got = check(tmp_path)
    assert got.returncode == 1, got
    line = got.stdout.strip()
    assert line.startswith("module cycle (")
    assert "duomq.a" in line and "duomq.alone" not in line
    assert "1 module cycle(s)" in got.stderr


def test_a_package_without_one_passes(tmp_path):
    package(tmp_path, {"a": "import duomq.b\n", "b": "import duomq.c\n", "c": "X = 1\n"})
    got = check(tmp_path)
    assert got.returncode == 0, got
    assert got.stdout.startswith("module cycles: none in ")
