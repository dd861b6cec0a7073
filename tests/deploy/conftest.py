"""Fixtures of the container tests: the images ``make image`` builds."""

import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent


@pytest.fixture(scope="session")
def images(tmp_path_factory):
    """`make image`'s script: builds both images, or reuses its cached layers."""
    log = tmp_path_factory.mktemp("image") / "image.log"
    with open(log, "w") as out:
        rc = subprocess.run(["bash", "scripts/image.sh"], cwd=ROOT, stdout=out,
                            stderr=subprocess.STDOUT, timeout=1800).returncode
    if rc != 0:
        pytest.fail("make image failed:\n" + log.read_text()[-4000:])
    return log.read_text().splitlines()[-5:]
