"""Consumer-group membership: each consumer holds an ephemeral node; a
children watch tells every member at once when the group changes."""

from __future__ import annotations

import logging
from collections.abc import Callable

from kazoo.client import KazooState
from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch

from duomq.coordinator.group_nodes import GroupMemberNode
from duomq.coordinator.paths import ZkPaths

log = logging.getLogger(__name__)


class GroupMembership:
    def __init__(self, zk, cluster: str, group: str, client_id: str, node: GroupMemberNode,
                 on_change: Callable[[list[str]], None]):
        self.zk = zk
        self.paths = ZkPaths(cluster)
        self.group = group
        self.client_id = client_id
        self.node = node
        self.on_change = on_change
        self.members: list[str] = []
        self._closed = False
        self._lost = False

    def join(self) -> None:
        self.zk.ensure_path(self.paths.group_members(self.group))
        self._create()
        self.zk.add_listener(self._on_state)
        ChildrenWatch(self.zk, self.paths.group_members(self.group), self._on_children)

    def _create(self) -> None:
        try:
            self.zk.create(self.paths.group_member(self.group, self.client_id), self.node.to_bytes(),
                           ephemeral=True)
        except NodeExistsError:
            pass

    def _on_children(self, children):
        if self._closed:
            return False
        self.members = sorted(children)
        try:
            self.on_change(self.members)
        except Exception:
            log.exception("membership callback failed")
        return True

    def _on_state(self, state):
        if state == KazooState.LOST:
            self._lost = True
        elif state == KazooState.CONNECTED and self._lost and not self._closed:
            self._lost = False
            self.zk.handler.spawn(self._create)

    def leave(self) -> None:
        self._closed = True
        try:
            self.zk.delete(self.paths.group_member(self.group, self.client_id))
        except NoNodeError:
            pass


def list_members(zk, cluster: str, group: str) -> list[str]:
    try:
        return sorted(zk.get_children(ZkPaths(cluster).group_members(group)))
    except NoNodeError:
        return []
