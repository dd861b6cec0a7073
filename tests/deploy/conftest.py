"""Fixtures of the container tests: the images ``make image`` builds, and
the prod overlay's pods started from them."""

import contextlib
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


@pytest.fixture(scope="session")
def prod_pods(images, tmp_path_factory):
    """The prod overlay's pods, secured (its ZooKeeper ensemble, the broker
    pair and an admin container), started once for the container tests:
    the pair's own tests (test_containers.py), then the drills
    (test_containers_drill.py), which end with the pair and the ensemble
    whole again (a drill's heal waits for the restarted server). The brokers advertise their container
    IPs, so that a drill on the host reaches them as the client containers
    do."""
    from duomq.testing.prod_pods import running
    with _PODS:
        yield _PODS.enter_context(running(tmp_path_factory.mktemp("pods"), advertise_ips=True))


_PODS = contextlib.ExitStack()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """The pods stop after the last test that uses them, not at the end of
    the session: the rest of the suite runs without five idle containers."""
    if "prod_pods" in getattr(item, "fixturenames", ()) and \
            "prod_pods" not in getattr(nextitem, "fixturenames", ()):
        _PODS.close()
