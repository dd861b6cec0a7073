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

from kazoo.exceptions import NoAuthError, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import DataWatch

from duomq.client.cluster.made_nodes import acl_in_group
from duomq.common.errors import ServiceNotAvailableError
from duomq.common.message import MessageQueue
from duomq.coordinator.group_nodes import OffsetResetNode
from duomq.coordinator.nodes import NodeError
from duomq.coordinator.paths import ZkPaths

log = logging.getLogger(__name__)


def publish(zk, cluster: str, group: str, topic: str, offsets: dict[MessageQueue, int],
            timestamp_ms: int) -> str:
    """Publish a reset for the live members; returns its id. In a secured
    cluster a reset node is its maker's: another user of the group replaces
    it (delete, then create); a group without nodes has no live member to
    tell."""
    node = OffsetResetNode(topic, dict(offsets), timestamp_ms)
    path = ZkPaths(cluster).group_reset(group, topic)
    acl = acl_in_group(zk, ZkPaths(cluster).consumer_group(group))
    if acl is None:                  # a cluster without auth
        zk.ensure_path(path)
        zk.set(path, node.to_bytes())
        return node.id
    for _ in range(3):
        try:
            zk.set(path, node.to_bytes())
            return node.id
        except NoNodeError:
            pass
        except NoAuthError:          # another user's: replaced
            try:
                zk.delete(path)
            except NoNodeError:
                pass
        try:
            zk.create(path, node.to_bytes(), acl=acl)
            return node.id
        except NoNodeError:
            log.info("consumer group %s has no nodes in ZooKeeper: no live member to tell", group)
            return node.id
        except NodeExistsError:
            continue                 # made meanwhile: set it
    raise ServiceNotAvailableError(f"cannot publish the offset reset of {group}/{topic}: its "
                                   f"node keeps changing")


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
