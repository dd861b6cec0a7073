"""The generated reference pages cover the code: every config field with a
meaning, every command with its usage."""

import dataclasses

import pytest

from duomq.cli.main import COMMANDS
from duomq.cli.reference import cli_page, config_page, field_docs
from duomq.common.client_config import ConsumerConfig, ProducerConfig
from duomq.common.config import BrokerConfig


@pytest.mark.parametrize("cls", [BrokerConfig, ProducerConfig, ConsumerConfig])
def test_every_config_field_is_documented_beside_it(cls):
    docs = field_docs(cls)
    assert [d[1] for d in docs] == [f.name for f in dataclasses.fields(cls)]
    undocumented = [d[1] for d in docs if not d[4]]
    assert not undocumented, f"fields of {cls.__name__} without a comment: {undocumented}"


def test_the_pages_name_every_field_and_command():
    page = config_page()
    for cls in (BrokerConfig, ProducerConfig, ConsumerConfig):
        for f in dataclasses.fields(cls):
            assert f"| `{f.name}` |" in page
    assert "| `retention_wait_for_consumers` | `bool` | `true` |" in page
    cli = cli_page()
    for command in COMMANDS:
        assert f"## `duomq {command}" in cli
    assert "## `duomq group reset`" in cli and "## `duomq produce`" in cli


def test_the_committed_pages_are_what_the_code_renders(tmp_path):
    import pathlib

    from duomq.cli.reference import write
    committed = pathlib.Path(__file__).resolve().parent.parent / "docs" / "reference"
    for path in map(pathlib.Path, write(str(tmp_path))):
        assert (committed / path.name).read_text() == path.read_text(), \
            f"docs/reference/{path.name} is stale: run `python -m duomq.cli.reference`"
