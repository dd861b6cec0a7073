"""One preallocated, fixed-size segment file.

Writes go through ``os.pwrite`` (one call per batch); reads go through a
read-only shared ``mmap`` of the whole file, which sees the page cache and so
every completed write. An unmapped segment (``mapped=False``: consume
queues, small reads) is read with ``os.pread``: Python's ``mmap`` keeps a
duplicate of the file descriptor, so a mapping costs a second descriptor per
file, and a broker with 10,000 queues would need 20,000. ``wrote`` and
``flushed`` are positions relative to the segment start; the owner
publishes ``wrote`` only after the write returned.
"""

from __future__ import annotations

import mmap
import os

ZERO_CHUNK = bytes(1 << 20)


def pwrite_all(fd: int, data, pos: int) -> None:
    """Write all of ``data`` at ``pos`` (pwrite may write less than asked)."""
    n = os.pwrite(fd, data, pos)
    if n == len(data):                   # the common case: one call, no view
        return
    view = memoryview(data)[n:]
    pos += n
    while view:
        n = os.pwrite(fd, view, pos)
        view = view[n:]
        pos += n


def preallocate(fd: int, path: str, size: int) -> None:
    """Reserve ``[0, size)`` of the file on disk (a no-op where it already is:
    an existing file from a version that left holes gets them filled, or is
    refused)."""
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as exc:
        code = exc.errno or 0
        raise OSError(code, f"cannot preallocate {size} bytes for {path}: "
                            f"{os.strerror(code)}") from None


class Segment:
    __slots__ = ("path", "base", "size", "fd", "_mm", "wrote", "flushed")

    def __init__(self, path: str, base: int, size: int, fd: int, mm: mmap.mmap | None):
        self.path = path
        self.base = base
        self.size = size
        self.fd = fd
        self._mm = mm
        self.wrote = 0
        self.flushed = 0

    @classmethod
    def open(cls, path: str, base: int, size: int, mapped: bool = True) -> Segment:
        """Open or create ``path``, preallocated to ``size`` (fallocate: the
        space is reserved, reads of unwritten parts give zeros). Space that
        cannot be reserved is an ``OSError`` (ENOSPC) naming the file, and a
        file this call created is removed: a sparse segment would fault with
        SIGBUS when a full disk cannot back a page of its mapping."""
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644) \
            if not os.path.exists(path) else None
        created = fd is not None
        if fd is None:
            fd = os.open(path, os.O_RDWR, 0o644)
        try:
            preallocate(fd, path, size)
            mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ) if mapped else None
        except BaseException:
            os.close(fd)
            if created:
                os.unlink(path)
            raise
        return cls(path, base, size, fd, mm)

    @property
    def mm(self) -> mmap.mmap:
        """The read-only mapping of a mapped segment."""
        if self._mm is None:
            raise ValueError(f"segment {self.path} is read with pread; it has no mapping")
        return self._mm

    @property
    def end(self) -> int:
        return self.base + self.size

    def write(self, data, rel_pos: int) -> None:
        pwrite_all(self.fd, data, rel_pos)

    def read(self, rel_pos: int, n: int) -> bytes:
        """``n`` bytes at ``rel_pos`` (fewer at the segment's end)."""
        if self._mm is not None:
            return self._mm[rel_pos:rel_pos + n]
        return os.pread(self.fd, max(0, min(n, self.size - rel_pos)), rel_pos)

    def release_mapping(self) -> None:
        """Drop this process's page-table entries for the whole mapping
        (``madvise(MADV_DONTNEED)``; the page cache keeps the pages and the
        next read maps them again). Pages a process has mapped survive
        ``posix_fadvise(DONTNEED)``: after a one-off scan (recovery) they
        would otherwise stay cached because this process touched them once."""
        if self._mm is not None:
            self._mm.madvise(mmap.MADV_DONTNEED)

    def flush(self) -> int:
        """fdatasync if anything is unflushed; return the flushed position."""
        wrote = self.wrote
        if wrote > self.flushed:
            os.fdatasync(self.fd)
            self.flushed = wrote
        return self.flushed

    def zero_from(self, rel_pos: int) -> None:
        """Zero [rel_pos, ...) up to the first chunk that is already all zero
        (the file keeps its size). Stale bytes past a truncation point can
        never be read back as records."""
        pos = rel_pos
        while pos < self.size:
            n = min(len(ZERO_CHUNK), self.size - pos)
            if pos > rel_pos and self.read(pos, n).count(0) == n:
                break
            self.write(ZERO_CHUNK[:n], pos)
            pos += n
        os.fdatasync(self.fd)

    def close(self) -> None:
        try:
            if self._mm is not None:
                self._mm.close()
        except (BufferError, ValueError):
            pass  # a reader still holds a view; the mapping goes with the process
        os.close(self.fd)

    def destroy(self) -> None:
        self.close()
        os.unlink(self.path)
