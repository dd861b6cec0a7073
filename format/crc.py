"""CRC-32C for the pure (Python and numpy) paths: the C loops' own function
when they are built, else the ``crc32c`` package's. The same values either
way (the tests compare them); the package is imported only without the C
loops, because its import reads its own metadata (``importlib.metadata``):
~45 ms of every duomq process's start, a broker's, a client's or the CLI's."""

from __future__ import annotations

from collections.abc import Callable

from duomq.format import native


def _choose() -> Callable[..., int]:
    if native.LOOPS is not None:
        return native.LOOPS.crc32c  # type: ignore[no-any-return]
    import crc32c as package
    return package.crc32c


crc32c = _choose()
