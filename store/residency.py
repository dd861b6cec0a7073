"""Is a commit-log range in the page cache? ``mincore`` through ctypes on a
private read-only mapping of the range (a 64 KiB window costs ~12 us).
Returns None where the probe is unavailable, and callers fall back to a rule
that does not need it."""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os

_libc = None
_LOW_BIT = bytes(i & 1 for i in range(256))   # mincore: bit 0 says resident
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _lib():
    global _libc
    if _libc is None:
        lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        lib.mmap.restype = ctypes.c_void_p
        lib.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                             ctypes.c_int, ctypes.c_long]
        lib.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        lib.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
        _libc = lib
    return _libc


def resident_fraction(fd: int, offset: int, length: int) -> float | None:
    """Fraction of the pages of ``[offset, offset + length)`` of file ``fd`` in
    the page cache, or None if it cannot be told."""
    try:
        lib = _lib()
    except OSError:
        return None
    start = offset - offset % PAGE
    length = max(PAGE, offset + length - start)
    addr = lib.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, fd, start)
    if addr in (None, ctypes.c_void_p(-1).value):
        return None
    try:
        pages = (length + PAGE - 1) // PAGE
        vec = ctypes.create_string_buffer(pages)
        if lib.mincore(addr, length, vec) != 0:
            return None
        return vec.raw.translate(_LOW_BIT).count(1) / pages
    finally:
        lib.munmap(addr, length)


PROBE_BYTES = 64 << 10       # the page-cache windows probed for a pull
# A sequential reader's next position is usually cached by the kernel's
# readahead even deep in a cold backlog (this machine's disk reads 8 MiB
# ahead), so a second window is probed this far past the pull position.
PROBE_AHEAD = 16 << 20


def window_residency(mfq, phys: int, behind: int) -> float | None:
    """The lower page-cache residency of the commit-log window at ``phys``
    and of the one ``PROBE_AHEAD`` past it (when the log reaches that far);
    None when it cannot be told. ``mfq``: the commit log's segments."""
    probes = [phys] + ([phys + PROBE_AHEAD] if behind > PROBE_AHEAD + PROBE_BYTES else [])
    fractions = []
    for at in probes:
        seg = mfq.find(at)
        if seg is not None:
            f = resident_fraction(seg.fd, at - seg.base, min(PROBE_BYTES, seg.end - at))
            if f is not None:
                fractions.append(f)
    return min(fractions) if fractions else None


TAIL_BYTES = 64 << 20        # the tail whose residency the metrics report


def tail_residency(mfq, end: int, tail: int = TAIL_BYTES) -> float | None:
    """Fraction of the last ``tail`` bytes of the commit log (up to ``end``)
    in the page cache: 1.0 means readers of recent messages never touch the
    disk. None when it cannot be told or the log is empty."""
    start = max(mfq.min_offset, end - tail)
    resident = total = 0.0
    at = start
    while at < end:
        seg = mfq.find(at)
        if seg is None:
            return None
        n = min(end, seg.end) - at
        if n <= 0:
            return None
        f = resident_fraction(seg.fd, at - seg.base, n)
        if f is None:
            return None
        resident += f * n
        total += n
        at += n
    return resident / total if total else None
