"""The C loops take the record layout from format/layout.h, generated from
format/record.py: the committed header must be what the layout renders
now, and the built extension must have been compiled from it."""

import pathlib

import pytest

from duomq.format import layout_h, native
from duomq.format import record as rec

HEADER = pathlib.Path(__file__).resolve().parents[2] / "format" / "layout.h"


def test_the_committed_header_is_what_the_python_layout_renders():
    assert HEADER.read_text() == layout_h.render(), \
        "format/layout.h is stale: run `python -m duomq.format.layout_h > format/layout.h`"


def test_the_header_names_every_field_at_its_offset():
    text = HEADER.read_text()
    for name in rec.NAMES:
        assert f"#define OFF_{name.upper()} {rec.OFFSET[name]} " in text
    assert f"#define HEADER_SIZE {rec.HEADER_SIZE}\n" in text


@pytest.mark.skipif(native.LOOPS is None, reason="built without the C loops (DUOMQ_NATIVE=0)")
def test_the_built_c_loops_were_compiled_from_the_python_layout():
    assert layout_h.compiled() == layout_h.constants()


def test_the_c_source_spells_no_offset_of_its_own():
    sources = [HEADER.parent / "_native.c", *sorted((HEADER.parent / "csrc").glob("*.[ch]"))]
    assert len(sources) >= 5
    for path in sources:
        source = path.read_text()
        for literal in ("r + 60", "r + 8)", "w + 56", "r + 12", "74", "0xD0E0"):
            assert literal not in source, f"{path.name}: {literal}"
