"""MkDocs hook: the pages kept beside what they describe (Kubernetes, in
deploy/k8s; the changelog, at the top). The configuration and CLI
references are committed in docs/reference/, written by ``python -m
duomq.cli.reference`` (a test checks they match the code)."""

from __future__ import annotations

import pathlib

from mkdocs.structure.files import File, Files

ROOT = pathlib.Path(__file__).resolve().parent.parent


def on_files(files: Files, config) -> Files:
    changelog = (ROOT / "CHANGELOG.md").read_text().replace(
        "(docs/operations/upgrading.md)", "(operations/upgrading.md)")
    kubernetes = (ROOT / "deploy" / "k8s" / "README.md").read_text()
    for uri, content in (("changelog.md", changelog),
                         ("kubernetes.md", kubernetes)):
        files.append(File.generated(config, uri, content=content))
    return files
