"""Where the manifests' images come from, rendered by the real kustomize:
no name that a container runtime would complete to Docker Hub (`duomq/duomq`
is docker.io/duomq/duomq, a namespace this project does not own), one
placeholder registry to replace in each overlay, and a user's overlay that
names a registry and pins digests."""

import re

import pytest
import yaml

from duomq import __version__
from duomq.testing.k8s import OVERLAYS, containers, prod_with, render

PLACEHOLDER = "registry.invalid"
DIGEST = "sha256:" + "ab" * 32


def reference(image: str) -> tuple[str, str]:
    """(registry, repository) of an image reference as the container
    runtimes read it (Docker's normalization): the first part names a
    registry only with a '.' or ':' in it or as 'localhost'; else the image
    is Docker Hub's, and a one-part name is in its `library` namespace."""
    name = re.split(r"[@]", image)[0]
    name = re.sub(r":[\w.-]+$", "", name)
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return first, rest
    return "docker.io", name if rest else f"library/{name}"


def test_reference_reads_names_as_the_runtimes_do():
    assert reference("duomq/duomq:0.1.0") == ("docker.io", "duomq/duomq")
    assert reference("zookeeper:3.8.4") == ("docker.io", "library/zookeeper")
    assert reference("docker.io/library/zookeeper:3.8.4") == ("docker.io", "library/zookeeper")
    assert reference("localhost/duomq/duomq:1") == ("localhost", "duomq/duomq")
    assert reference("reg.example.com:5000/a/b@" + DIGEST) == ("reg.example.com:5000", "a/b")


def images(docs) -> dict[str, str]:
    return {f"{d['metadata']['name']}/{c['name']}": c["image"] for d, _s, c in containers(docs)}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_image_names_its_registry(overlay):
    """duomq's from the one placeholder the overlay says to replace; in
    prod, ZooKeeper's from the same registry (a mirror of the official
    image), in dev the official image, named in full."""
    found = images(render(f"overlays/{overlay}"))
    assert len(found) >= 3
    for who, image in found.items():
        registry, repo = reference(image)
        if repo.startswith("duomq/duomq"):
            assert registry == PLACEHOLDER and image.endswith(":" + __version__), (who, image)
        elif overlay == "prod":
            assert registry == PLACEHOLDER, (who, image)
        else:
            assert image == "docker.io/library/zookeeper:3.8.4", (who, image)
        assert not repo.startswith("duomq/") or registry != "docker.io", (who, image)


def test_no_directory_renders_an_image_docker_hub_would_complete():
    for path in ("base", *(f"overlays/{o}" for o in OVERLAYS)):
        for who, image in images(render(path)).items():
            first = image.split("/")[0]
            assert "/" in image and ("." in first or ":" in first or first == "localhost"), \
                f"{path}: {who}: {image} is completed by the runtime (docker.io)"


def test_a_users_overlay_names_its_registry_and_pins_digests(tmp_path):
    """What the Images section of deploy/k8s/README.md tells a user to
    write (and `make image REGISTRY=...` prints)."""
    extra = f"""images:
  - name: registry.invalid/duomq/duomq
    newName: registry.example.com/team/duomq
    digest: {DIGEST}
  - name: registry.invalid/duomq/duomq-spark
    newName: registry.example.com/team/duomq-spark
    digest: {DIGEST}
  - name: registry.invalid/duomq/zookeeper
    newName: registry.example.com/mirror/zookeeper
    newTag: "3.8.4"
"""
    found = images([d for d in yaml.safe_load_all(prod_with(tmp_path, extra=extra)) if d])
    assert set(found.values()) == {f"registry.example.com/team/duomq@{DIGEST}",
                                   f"registry.example.com/team/duomq-spark@{DIGEST}",
                                   "registry.example.com/mirror/zookeeper:3.8.4"}
    assert not any(PLACEHOLDER in i for i in found.values())
