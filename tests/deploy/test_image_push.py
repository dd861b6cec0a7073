"""`make image REGISTRY=...` against a real registry (Debian's
docker-registry, Distribution 2.8, started here on 127.0.0.1 without TLS):
both images pushed, the registry serving them under the digests the script
prints, those lines pinning the prod overlay's images when pasted into a
user's overlay, and podman pulling the pinned images back, the same images
as were built."""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import time
import urllib.request

import pytest
import yaml

from duomq import __version__
from duomq.dev.ports import free_port
from duomq.testing.k8s import containers, prod_with
from duomq.testing.podman import podman

pytestmark = [pytest.mark.integration, pytest.mark.containers, pytest.mark.slow]

ROOT = pathlib.Path(__file__).resolve().parents[2]
MANIFEST_TYPES = ", ".join(["application/vnd.docker.distribution.manifest.v2+json",
                            "application/vnd.oci.image.manifest.v1+json"])


@pytest.fixture
def registry(tmp_path):
    port = free_port()
    config = tmp_path / "registry.yml"
    config.write_text(yaml.safe_dump({
        "version": 0.1, "log": {"level": "warn"},
        "storage": {"filesystem": {"rootdirectory": str(tmp_path / "store")}},
        "http": {"addr": f"127.0.0.1:{port}"}}))
    log = open(tmp_path / "registry.log", "w")
    # scripts/install.sh unpacks it into the venv (no service installed)
    binary = shutil.which("docker-registry") or \
        os.path.join(os.path.dirname(sys.executable), "docker-registry")
    proc = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2)
            break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                log.close()
                pytest.fail("docker-registry did not start:\n" +
                            (tmp_path / "registry.log").read_text())
            time.sleep(0.2)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


def served_digest(registry: str, repo: str, tag: str) -> str:
    req = urllib.request.Request(f"http://{registry}/v2/{repo}/manifests/{tag}",
                                 headers={"Accept": MANIFEST_TYPES}, method="HEAD")
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.headers["Docker-Content-Digest"]


def test_make_image_pushes_and_prints_the_lines_that_pin_the_overlay(images, registry,
                                                                       tmp_path):
    where = f"{registry}/team"
    p = subprocess.run(["bash", "scripts/image.sh", "--push", where], cwd=ROOT,
                       env={**os.environ, "REGISTRY_TLS_VERIFY": "false"},
                       capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    stanza = p.stdout[p.stdout.index("images:\n"):]
    pins = {i["name"]: i for i in yaml.safe_load(stanza)["images"]}
    for name in ("duomq", "duomq-spark"):
        pin = pins[f"registry.invalid/duomq/{name}"]
        assert pin["newName"] == f"{where}/{name}"
        assert pin["digest"] == served_digest(registry, f"team/{name}", __version__)
    # pasted into a user's overlay, with the ZooKeeper mirror
    extra = stanza + "  - name: registry.invalid/duomq/zookeeper\n" \
        f"    newName: {registry}/mirror/zookeeper\n"
    docs = [d for d in yaml.safe_load_all(prod_with(tmp_path, extra=extra)) if d]
    found = {c["image"] for _d, _s, c in containers(docs)}
    pinned = {f"{where}/{n}@{pins[f'registry.invalid/duomq/{n}']['digest']}"
              for n in ("duomq", "duomq-spark")}
    assert found == pinned | {f"{registry}/mirror/zookeeper:3.8.4"}
    # and the cluster's runtime gets back, by digest, what was built
    try:
        for name in ("duomq", "duomq-spark"):
            pushed = f"{where}/{name}:{__version__}"
            podman("untag", pushed, pushed)       # that name only: the registry has it now
            image = f"{where}/{name}@{pins[f'registry.invalid/duomq/{name}']['digest']}"
            podman("pull", "-q", "--tls-verify=false", image, timeout_s=600)
            got = json.loads(podman("image", "inspect", image).stdout)[0]["Id"]
            built = f"localhost/duomq/{name}:{__version__}"
            assert got == json.loads(podman("image", "inspect", built).stdout)[0]["Id"]
    finally:                                      # the built images keep their own names
        for name in ("duomq", "duomq-spark"):
            for ref in (f"{where}/{name}:{__version__}", f"{where}/{name}"):
                podman("untag", f"localhost/duomq/{name}:{__version__}", ref, check=False)
