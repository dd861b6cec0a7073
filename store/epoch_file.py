"""The epoch this store's log last followed or led, kept beside the log
(Kafka's leader-epoch checkpoint, reduced to the last entry). A broker that
returns from an older epoch truncates to where the next epoch began."""

from __future__ import annotations

import json
import os


class EpochFile:
    """Only its broker writes it: what was read or written last is kept, so
    the snapshot the serving thread publishes every tick reads no file."""

    def __init__(self, path: str):
        self.path = path
        self._value: int | None = None

    def read(self) -> int:
        if self._value is None:
            try:
                with open(self.path) as f:
                    self._value = int(json.load(f).get("epoch", 0))
            except (FileNotFoundError, ValueError):
                self._value = 0
        return self._value

    def write(self, epoch: int) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"epoch": epoch}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self._value = epoch
