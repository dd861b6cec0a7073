"""Consumer offsets kept on the broker (RocketMQ's ``ConsumerOffsetManager``),
persisted as JSON with an atomic rename. Every change gets a version, so the
master pushes exactly the changes each slave lacks over the replication link
(a slave never writes offsets back)."""

from __future__ import annotations

import json
import os
import threading

from duomq.common.errors import ConfigError

DELETED = -1                  # in the change stream: this queue's offset was forgotten


class ConsumerOffsetManager:
    def __init__(self, path: str):
        self.path = path
        self._offsets: dict[tuple[str, str, int], int] = {}
        self._versions: dict[tuple[str, str, int], int] = {}   # key -> version of its last change
        self.version = 0                                       # rises with every change
        self._lock = threading.Lock()
        self._dirty = False
        self._groups: dict[str, int] = {}     # group -> keys it has

    def has_group(self, group: str) -> bool:
        return group in self._groups

    def groups(self) -> int:
        return len(self._groups)

    def load(self) -> None:
        """Read the file; a damaged one is refused with a ``ConfigError`` that
        names it (starting with no offsets would silently rewind or skip
        every group's consumption)."""
        try:
            with open(self.path, "rb") as f:
                data = json.loads(f.read())
            offsets = {(group, topic, int(qid)): int(off)
                       for group, topics in data["offsets"].items()
                       for topic, queues in topics.items()
                       for qid, off in queues.items()}
        except FileNotFoundError:
            return
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ConfigError(
                f"consumer offsets file {self.path} is damaged ({type(exc).__name__}: "
                f"{exc}): restore it, or move it aside to start with no committed "
                f"offsets") from None
        with self._lock:
            for key, off in offsets.items():
                self._put(key, off)

    def _put(self, key: tuple[str, str, int], offset: int) -> None:
        if key not in self._offsets:
            self._groups[key[0]] = self._groups.get(key[0], 0) + 1
        self._offsets[key] = offset

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Record ``offset``; ``DELETED`` (from a master's replication
        stream: the group was deleted there) forgets the queue's offset."""
        key = (group, topic, queue_id)
        with self._lock:
            if offset == DELETED:
                self._forget(key)
            elif self._offsets.get(key) != offset:
                self._put(key, offset)
                self.version += 1
                self._versions[key] = self.version
                self._dirty = True

    def delete_group(self, group: str) -> int:
        """Forget every committed offset of ``group``; how many there were.
        The deletions reach the slaves as changes (``DELETED``)."""
        with self._lock:
            keys = [k for k in self._offsets if k[0] == group]
            for key in keys:
                self._forget(key)
            return len(keys)

    def _forget(self, key: tuple[str, str, int]) -> None:
        if key not in self._offsets:
            return
        del self._offsets[key]
        left = self._groups[key[0]] - 1
        if left:
            self._groups[key[0]] = left
        else:
            del self._groups[key[0]]
        self.version += 1
        self._versions[key] = self.version       # a tombstone: slaves learn of it
        self._dirty = True

    def changes_since(self, version: int) -> tuple[int, list[tuple[tuple[str, str, int], int]]]:
        """(current version, entries changed after ``version``): what a slave
        that has seen ``version`` still lacks (``DELETED`` for an offset
        forgotten)."""
        with self._lock:
            return self.version, [(k, self._offsets.get(k, DELETED))
                                  for k, v in self._versions.items() if v > version]

    def fetch(self, group: str, topic: str, queue_id: int) -> int:
        return self._offsets.get((group, topic, queue_id), -1)

    def items(self) -> list[tuple[tuple[str, str, int], int]]:
        with self._lock:
            return list(self._offsets.items())

    def persist(self, force: bool = False) -> bool:
        with self._lock:
            if not (self._dirty or force):
                return False
            snapshot = list(self._offsets.items())
            self._dirty = False
        data: dict = {}
        for (group, topic, qid), off in snapshot:
            data.setdefault(group, {}).setdefault(topic, {})[str(qid)] = off
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"offsets": data}, f, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        return True
