"""Offset resets of a consumer group (``duomq group reset-offset``).

The operator's command commits the new offsets to the masters (where a member
that takes a queue later starts) and publishes them in
``/duomq/<cluster>/groups/<group>/resets/<topic>`` with a fresh id; every live
member watches that node for its topic and moves the queues it holds there
(RocketMQ's broker-to-client ``RESET_CONSUMER_CLIENT_OFFSET``, through
ZooKeeper). A reset published before a member started is not applied again:
its offsets are already the committed ones.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

from kazoo.recipe.watchers import DataWatch

from duomq.common.message import MessageQueue
from duomq.coordinator.paths import ZkPaths
from duomq.coordinator.zk import dumps, loads

log = logging.getLogger(__name__)


def encode(topic: str, offsets: dict[MessageQueue, int], timestamp_ms: int) -> dict:
    return {"id": uuid.uuid4().hex, "topic": topic, "timestamp_ms": timestamp_ms,
            "offsets": {f"{mq.broker_group}/{mq.queue_id}": off
                        for mq, off in sorted(offsets.items())}}


def decode(data: dict) -> tuple[str, dict[MessageQueue, int]]:
    """(id, offsets) of a published reset; raises ValueError when malformed."""
    try:
        topic, rid = data["topic"], data["id"]
        out = {}
        for where, off in data["offsets"].items():
            group, _, qid = where.rpartition("/")
            out[MessageQueue(topic, group, int(qid))] = int(off)
        return str(rid), out
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"not an offset reset: {exc}") from None


def publish(zk, cluster: str, group: str, topic: str, offsets: dict[MessageQueue, int],
            timestamp_ms: int) -> str:
    """Publish a reset for the live members; returns its id."""
    data = encode(topic, offsets, timestamp_ms)
    path = ZkPaths(cluster).group_reset(group, topic)
    zk.ensure_path(path)
    zk.set(path, dumps(data))
    return data["id"]


class ResetWatch:
    """Calls ``on_reset(offsets)`` for each reset of ``topic`` published after
    the watch started (on a kazoo thread)."""

    def __init__(self, zk, cluster: str, group: str, topic: str,
                 on_reset: Callable[[dict[MessageQueue, int]], None]):
        self.on_reset = on_reset
        self._seen: str | None = None
        self._first = True
        self._closed = False
        self._watch = DataWatch(zk, ZkPaths(cluster).group_reset(group, topic), self._changed)

    def _changed(self, data, _stat):
        if self._closed:
            return False
        first, self._first = self._first, False
        if not data:
            return True
        try:
            rid, offsets = decode(loads(data))
        except ValueError as exc:
            log.warning("ignoring an offset reset: %s", exc)
            return True
        if rid != self._seen:
            self._seen = rid
            if not first:
                self.on_reset(offsets)
        return True

    def close(self) -> None:
        self._closed = True
