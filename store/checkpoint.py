"""The store checkpoint: the commit-log offset below which every record is
on disk and every consume-queue entry is too. Recovery scans from it.

File layout (big-endian): offset (8), written-at ms (8), CRC32 of both (4).
Written to a temporary file, fsynced and renamed over the old one.
"""

from __future__ import annotations

import struct
import time
import zlib

from duomq.common.atomic_file import write_atomically

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
        write_atomically(self.path, head + struct.pack(">I", zlib.crc32(head)))
