"""The store checkpoint: the commit-log offset below which every record is
on disk and every consume-queue entry is too. Recovery scans from it.

File layout (big-endian): offset (8), written-at ms (8), CRC32 of both (4).
Written to a temporary file, fsynced and renamed over the old one.
"""

from __future__ import annotations

import os
import struct
import time
import zlib

_FMT = struct.Struct(">qqI")


class Checkpoint:
    def __init__(self, path: str):
        self.path = path

    def read(self) -> int | None:
        """The checkpointed offset, or None (absent or damaged: scan everything)."""
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return None
        if len(raw) != _FMT.size:
            return None
        offset, ts, crc = _FMT.unpack(raw)
        if zlib.crc32(raw[:16]) != crc:
            return None
        return offset

    def write(self, offset: int) -> None:
        head = struct.pack(">qq", offset, int(time.time() * 1000))
        tmp = self.path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, head + struct.pack(">I", zlib.crc32(head)))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dfd = os.open(os.path.dirname(self.path) or ".", os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
