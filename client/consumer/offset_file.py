"""Offsets a broadcasting consumer keeps itself, in a local JSON file (as
RocketMQ's LocalFileOffsetStore): in broadcast mode every member reads every
queue, so the brokers' per-group offsets cannot say where each one is.

The file is replaced atomically (write, fsync, rename), so a crash leaves the
previous or the new offsets, never a torn file."""

from __future__ import annotations

import json
import os
import threading

from duomq.common.errors import ConfigError
from duomq.common.message import MessageQueue


def _key(mq: MessageQueue) -> str:
    return f"{mq.topic}@{mq.broker_group}@{mq.queue_id}"


class LocalOffsetStore:
    def __init__(self, path: str):
        self.path = path
        self._lock = threading.Lock()
        self._offsets: dict[str, int] = {}
        try:
            with open(path) as f:
                data = json.load(f)
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            raise ConfigError(f"offset file {path} cannot be read: {exc}") from None
        if not isinstance(data, dict) or not all(isinstance(v, int) for v in
                                                 data.get("offsets", {}).values()):
            raise ConfigError(f"offset file {path} is not a duomq offset file")
        self._offsets = dict(data.get("offsets", {}))

    def committed(self, mq: MessageQueue) -> int:
        """The next offset to consume of ``mq``; -1 if none was kept."""
        with self._lock:
            return self._offsets.get(_key(mq), -1)

    def commit(self, offsets: dict[MessageQueue, int]) -> None:
        with self._lock:
            self._offsets.update((_key(mq), int(off)) for mq, off in offsets.items())
            text = json.dumps({"offsets": self._offsets}, sort_keys=True, indent=1)
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            tmp = f"{self.path}.tmp"
            with open(tmp, "w") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)


def default_path(directory: str, cluster: str, group: str, instance: str) -> str:
    """``<directory>/<cluster>/<group>/<instance>.json``."""
    return os.path.join(os.path.expanduser(directory or "~/.duomq/offsets"), cluster, group,
                        f"{instance}.json")
