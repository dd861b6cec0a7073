"""Rules for the names of topics, consumer and producer groups, broker groups
and clusters: ``[A-Za-z0-9_-]{1,127}``. The prefixes ``%RETRY%`` and ``%DLQ%``
are reserved for the system's own retry and dead-letter topics."""

from __future__ import annotations

import re

from duomq.common.errors import InvalidNameError

NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,127}")
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
SYSTEM_PREFIXES = (RETRY_PREFIX, DLQ_PREFIX)


def validate_name(kind: str, name: str, *, allow_system: bool = False) -> str:
    """Return ``name`` if it is a valid ``kind`` name, else raise InvalidNameError.

    ``allow_system`` admits ``%RETRY%<group>`` and ``%DLQ%<group>`` (the broker
    and the consumer use them; users cannot create them).
    """
    if not isinstance(name, str):
        raise InvalidNameError(f"{kind} name must be a string, got {type(name).__name__}")
    for prefix in SYSTEM_PREFIXES:
        if name.startswith(prefix):
            if allow_system and NAME_RE.fullmatch(name[len(prefix):]):
                return name
            raise InvalidNameError(
                f"{kind} name {name!r} uses the reserved prefix {prefix!r}")
    if not NAME_RE.fullmatch(name):
        raise InvalidNameError(
            f"{kind} name {name!r} is invalid: use 1 to 127 characters from "
            f"[A-Za-z0-9_-]")
    return name
