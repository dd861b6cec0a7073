"""The optional C loops of ``format/_native.c``, or None.

``LOOPS`` is the compiled module when the package was built with a C
compiler (``pip install`` builds it; the build goes on without it when
there is none) and ``DUOMQ_NATIVE`` is not ``0``. Every caller keeps its
pure path (numpy or record by record) for ``LOOPS is None``, and the tests
run both and compare. Callers read ``native.LOOPS`` at each call, so a test
can switch it off."""

from __future__ import annotations

import os
from types import ModuleType


def _load() -> ModuleType | None:
    if os.environ.get("DUOMQ_NATIVE", "1") == "0":
        return None
    try:
        from duomq.format import _native
    except ImportError:
        return None
    return _native


LOOPS = _load()


def kind() -> str:
    """``c`` or ``numpy``: the label of ``duomq_build_info{record_loops}``."""
    return "c" if LOOPS is not None else "numpy"


def describe() -> str:
    """What serves the hot loops, for logs and ``--version``."""
    return f"C loops (CRC-32C: {LOOPS.CRC})" if LOOPS is not None else "numpy (no C loops)"
