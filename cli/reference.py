"""The reference pages of the documentation, generated from the code so that
they cannot drift from it: every configuration field from the config
dataclasses (its type, its default and the comment beside it), and every
command from the ``duomq`` parser (its usage and its options' help).
``python -m duomq.cli.reference`` writes them to ``docs/reference/``; a test
fails when the committed pages differ from what the code renders."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import re

from duomq.common.client_config import ConsumerConfig, ProducerConfig, SimpleConsumerConfig
from duomq.common.config import BrokerConfig

_FIELD = re.compile(r"^    (\w+): ([^=]+?)(?: = (.+?))?\s*(?:#\s?(.*))?$")
_MORE = re.compile(r"^\s+#\s?(.*)$")
_SECTION = re.compile(r"^    # --- (.*)$")


def field_docs(cls) -> list[tuple[str, str, str, str, str]]:
    """``(section, name, type, default, meaning)`` of every field of a config
    dataclass, in source order, from its class body: the comment beside a
    field and the comment lines under it are its meaning."""
    names = {f.name for f in dataclasses.fields(cls)}
    out: list[list[str]] = []
    section = ""
    source = inspect.getsource(cls).splitlines()
    body = next(i for i, line in enumerate(source) if line.startswith("class ")) + 1
    for line in source[body:]:
        if line.lstrip().startswith(("def ", "@")):
            break                          # the methods: the fields are above them
        if m := _SECTION.match(line):
            section = m.group(1)
            continue
        m = _FIELD.match(line)
        if m and m.group(1) in names:
            out.append([section, m.group(1), m.group(2).strip(), (m.group(3) or "").strip(),
                        (m.group(4) or "").strip()])
        elif out and (more := _MORE.match(line)):
            out[-1][4] = f"{out[-1][4]} {more.group(1).strip()}".strip()
    return [tuple(x) for x in out]  # type: ignore[misc]


def _default(cls, name: str, text: str) -> str:
    f = next(x for x in dataclasses.fields(cls) if x.name == name)
    if f.default is not dataclasses.MISSING:
        value = getattr(f.default, "value", f.default)
        if value is None:
            return "none"
        if isinstance(value, bool):
            return f"`{str(value).lower()}`"
        return f"`{value!r}`".replace("'", '"')
    return f"`{text}`" if text else ""


def config_page() -> str:
    """Markdown: one table per config dataclass."""
    parts = ["# Configuration reference", "",
             "Generated from `duomq/common/config.py` and `duomq/common/client_config.py` "
             "(`python -m duomq.cli.reference`; a "
             "test fails when this page differs from the code): the defaults and meanings "
             "below are the code's. How files, `DUOMQ_<FIELD>` variables and flags "
             "combine is in [Configuration](../configuration.md).", ""]
    for title, cls in (("Broker", BrokerConfig), ("Producer", ProducerConfig),
                       ("Consumer", ConsumerConfig),
                       ("Share-group consumer", SimpleConsumerConfig)):
        parts += [f"## {title} (`{cls.__name__}`)", ""]
        section = None
        for sect, name, type_, default, meaning in field_docs(cls):
            if sect != section:
                section = sect
                if sect:
                    parts += ["", f"### {sect[0].upper() + sect[1:]}", ""]
                parts += ["| field | type | default | meaning |", "|---|---|---|---|"]
            cell = meaning.replace("|", "\\|")
            parts.append(f"| `{name}` | `{type_}` | {_default(cls, name, default)} | {cell} |")
        parts.append("")
    return "\n".join(parts) + "\n"


def _commands(parser: argparse.ArgumentParser, prefix: str):
    """``(command words, its parser)`` for every leaf command, depth first."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield prefix, parser
        return
    seen: set[int] = set()
    for name, sub in subs[0].choices.items():
        if id(sub) in seen:            # an alias
            continue
        seen.add(id(sub))
        yield from _commands(sub, f"{prefix} {name}")


def cli_page() -> str:
    """Markdown: every ``duomq`` command, its usage and its options."""
    import os

    from duomq.cli.main import parser
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"         # usage lines as wide on every machine
    try:
        return _cli_page(parser())
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


def _cli_page(top: argparse.ArgumentParser) -> str:
    parts = ["# CLI reference", "",
             "Generated from the `duomq` command's own parser (`python -m "
             "duomq.cli.reference`; a test fails when this page differs). Every command "
             "takes `--zookeeper HOST:PORT[,...]` and `--cluster NAME` (defaults: "
             "`$DUOMQ_ZOOKEEPER`, `$DUOMQ_CLUSTER`, else the local dev cluster's: "
             "`eval \"$(duomq dev env)\"` sets them) and `--credentials PATH` (default "
             "`$DUOMQ_CREDENTIALS`); every command that reports takes `--json`. A mistake "
             "ends the command with one line on stderr and exit status 2.", ""]
    for words, p in _commands(top, "duomq"):
        parts += [f"## `{words}`", ""]
        if p.description or p.format_usage():
            help_text = next((a.help for a in _parent_choices(top, words) if a.help), "")
            if help_text:
                parts += [help_text[0].upper() + help_text[1:] + ".", ""]
        usage = p.format_usage().replace("usage: ", "").strip()
        parts += ["```", usage, "```", ""]
        rows = []
        for a in p._actions:
            if a.help == argparse.SUPPRESS or isinstance(a, argparse._HelpAction):
                continue
            flags = ", ".join(f"`{s}`" for s in a.option_strings) or f"`{a.metavar or a.dest}`"
            meaning = (a.help or "").replace("|", "\\|").replace("%%", "%")
            rows.append(f"| {flags} | {meaning} |")
        if rows:
            parts += ["| argument | meaning |", "|---|---|", *rows, ""]
    return "\n".join(parts) + "\n"


def _parent_choices(top: argparse.ArgumentParser, words: str):
    """The choice actions (``help=``) that lead to the command ``words``."""
    p, out = top, []
    for word in words.split()[1:]:
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            break
        action = subs[0]
        out = [c for c in action._choices_actions if c.dest == word]
        p = action.choices[word]
    return out


PAGES = {"configuration.md": config_page, "cli.md": cli_page}


def write(folder: str) -> list[str]:
    """Write every reference page into ``folder``; their paths."""
    import pathlib
    out = []
    for name, render in PAGES.items():
        path = pathlib.Path(folder) / name
        path.write_text(render())
        out.append(str(path))
    return out


if __name__ == "__main__":
    import pathlib
    import sys
    here = pathlib.Path(__file__).resolve().parent.parent / "docs" / "reference"
    print("\n".join(write(sys.argv[1] if len(sys.argv) > 1 else str(here))))
