"""The epoch this store's log last followed or led, kept beside the log
(Kafka's leader-epoch checkpoint, reduced to the last entry). A broker that
returns from an older epoch truncates to where the next epoch began."""

from __future__ import annotations

import json
import os


class EpochFile:
    def __init__(self, path: str):
        self.path = path

    def read(self) -> int:
        try:
            with open(self.path) as f:
                return int(json.load(f).get("epoch", 0))
        except (FileNotFoundError, ValueError):
            return 0

    def write(self, epoch: int) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"epoch": epoch}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
