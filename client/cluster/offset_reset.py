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
from collections.abc import Callable

from kazoo.recipe.watchers import DataWatch

from duomq.common.message import MessageQueue
from duomq.coordinator.group_nodes import OffsetResetNode
from duomq.coordinator.nodes import NodeError
from duomq.coordinator.paths import ZkPaths

log = logging.getLogger(__name__)


def publish(zk, cluster: str, group: str, topic: str, offsets: dict[MessageQueue, int],
            timestamp_ms: int) -> str:
    """Publish a reset for the live members; returns its id."""
    node = OffsetResetNode(topic, dict(offsets), timestamp_ms)
    path = ZkPaths(cluster).group_reset(group, topic)
    zk.ensure_path(path)
    zk.set(path, node.to_bytes())
    return node.id


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
            node = OffsetResetNode.from_bytes(data)
        except NodeError as exc:
            log.warning("ignoring an offset reset: %s", exc)
            return True
        if node.id != self._seen:
            self._seen = node.id
            if not first:
                self.on_reset(node.offsets)
        return True

    def close(self) -> None:
        self._closed = True
