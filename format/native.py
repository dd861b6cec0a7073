"""The optional C loops of ``format/_native.c``, or None, and the one switch
between them and the pure paths.

``LOOPS`` is the compiled module when the package was built with a C
compiler (``pip install`` builds it; the build goes on without it when
there is none) and ``DUOMQ_NATIVE`` is not ``0``. Every module with a C
loop keeps its pure path (numpy or record by record) and chooses between
the two once, at import (``chosen``: the names it calls are bound to one or
the other, as aiokafka picks each record class once), never at each call;
a C loop that answers None leaves that case to the Python (``declined`` is
what a module binds where there is no C loop). Tests run both and compare:
``use(None)`` makes every module choose again (the ``hot_loops`` fixture)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from types import ModuleType


def _load() -> ModuleType | None:
    if os.environ.get("DUOMQ_NATIVE", "1") == "0":
        return None
    try:
        from duomq.format import _native
    except ImportError:
        return None
    return _native


_loops = _load()
LOOPS: ModuleType | None       # declared for type checkers: a property of the module (_Module)


def kind() -> str:
    """``c`` or ``numpy``: the label of ``duomq_build_info{record_loops}``."""
    return "c" if _loops is not None else "numpy"


def describe() -> str:
    """What serves the hot loops, for logs and ``--version``."""
    return f"C loops (CRC-32C: {_loops.CRC})" if _loops is not None else "numpy (no C loops)"


_binds: list[Callable[[ModuleType | None], None]] = []


def declined(*args: object) -> None:
    """Bound where there is no C loop: every case left to the Python."""
    return None


def chosen(bind: Callable[[ModuleType | None], None]) -> Callable[[ModuleType | None], None]:
    """A module's choice between the C loops and its pure path: ``bind(loops)``
    (the C module, or None) binds the module's names; called now, and again
    whenever ``LOOPS`` is set. As a decorator of the module's binder."""
    _binds.append(bind)
    bind(_loops)
    return bind


def use(loops: ModuleType | None) -> ModuleType | None:
    """Every module's choice made again with ``loops`` (None: the pure paths,
    as a build without a compiler or ``DUOMQ_NATIVE=0`` runs); what was in use
    before is returned. For tests; setting ``native.LOOPS`` does the same."""
    global _loops
    before, _loops = _loops, loops
    for bind in _binds:
        bind(loops)
    return before


class _Module(ModuleType):
    """``LOOPS`` read and set as an attribute: setting it (a test's
    monkeypatch) is ``use``, so that no module goes on calling what it chose
    before."""

    @property
    def LOOPS(self) -> ModuleType | None:
        return _loops

    @LOOPS.setter
    def LOOPS(self, loops: ModuleType | None) -> None:
        use(loops)


sys.modules[__name__].__class__ = _Module
