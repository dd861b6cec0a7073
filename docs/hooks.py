"""MkDocs hook: the pages generated from the code at every build (the
configuration and CLI references, from ``duomq.cli.reference``) and the
pages kept beside the code they describe (Kubernetes, the changelog)."""

from __future__ import annotations

import pathlib

from mkdocs.structure.files import File, Files

ROOT = pathlib.Path(__file__).resolve().parent.parent


def on_files(files: Files, config) -> Files:
    from duomq.cli.reference import cli_page, config_page
    changelog = (ROOT / "CHANGELOG.md").read_text().replace(
        "(docs/operations/upgrading.md)", "(operations/upgrading.md)")
    kubernetes = (ROOT / "deploy" / "k8s" / "README.md").read_text()
    for uri, content in (("reference/configuration.md", config_page()),
                         ("reference/cli.md", cli_page()),
                         ("changelog.md", changelog),
                         ("kubernetes.md", kubernetes)):
        files.append(File.generated(config, uri, content=content))
    return files
