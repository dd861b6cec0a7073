"""Every package of the source tree is in the wheel (pyproject's explicit
list): a subpackage left out installs fine and fails only where the wheel
runs, in the images."""

import pathlib
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOT_SHIPPED = {"duomq.testing", "duomq.examples.pipeline"}   # the suite's and the demo's own


def test_every_package_is_listed():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())
                 ["tool"]["setuptools"]["packages"])
    found = {".".join(("duomq", *p.parent.relative_to(ROOT).parts))
             for p in ROOT.rglob("__init__.py")
             if not {".venv", "build", "tests", "chaos_tests"} & set(p.relative_to(ROOT).parts)}
    assert found - NOT_SHIPPED == listed
