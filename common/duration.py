"""Durations as people write them: ``500ms``, ``5s``, ``2m``, ``1h``, ``1d``
(an integer and a unit). The one parser for delay levels, ``duomq`` times
given as "ago", and anything else that takes a duration."""

from __future__ import annotations

import re

UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"(\d+)(ms|s|m|h|d)")


def parse_ms(text: str) -> int:
    """Milliseconds of a duration like ``5s``; ValueError names what is wrong."""
    m = _DURATION.fullmatch(text.strip())
    if not m:
        raise ValueError(f"{text!r} is not a duration such as 500ms, 5s, 2m, 1h or 1d")
    return int(m.group(1)) * UNITS_MS[m.group(2)]
