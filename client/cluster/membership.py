"""Consumer-group membership: each consumer holds an ephemeral node; a
children watch tells every member at once when the group changes."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from kazoo.client import KazooState
from kazoo.exceptions import NoAuthError, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch

from duomq.client.cluster.made_nodes import acl_in_group
from duomq.common.errors import AuthorizationError
from duomq.coordinator.group_nodes import GroupMemberNode
from duomq.coordinator.paths import ZkPaths

log = logging.getLogger(__name__)
GROUP_NODES_WAIT_S = 10.0       # for a broker to make a new group's nodes


class GroupMembership:
    def __init__(self, zk, cluster: str, group: str, client_id: str, node: GroupMemberNode,
                 on_change: Callable[[list[str]], None],
                 ask_brokers: Callable[[], None] | None = None):
        self.zk = zk
        self.paths = ZkPaths(cluster)
        self.group = group
        self.client_id = client_id
        self.node = node
        self.on_change = on_change
        # a secured cluster's clients may not make a group's nodes: a broker
        # makes them when it hears the group in a heartbeat (``ask_brokers``)
        self.ask_brokers = ask_brokers
        self.members: list[str] = []
        self._closed = False
        self._lost = False
        self._acl = None

    def join(self) -> None:
        path = self.paths.group_members(self.group)
        try:
            self.zk.ensure_path(path)
        except NoAuthError:
            self._wait_for_brokers(path)
        self._acl = acl_in_group(self.zk, self.paths.consumer_group(self.group))
        self._create()
        self.zk.add_listener(self._on_state)
        ChildrenWatch(self.zk, self.paths.group_members(self.group), self._on_children)

    def _wait_for_brokers(self, path: str) -> None:
        if self.ask_brokers is not None:
            self.ask_brokers()
        deadline = time.monotonic() + GROUP_NODES_WAIT_S
        while not self.zk.exists(path):
            if time.monotonic() > deadline:
                raise AuthorizationError(
                    f"consumer group {self.group!r} has no nodes in ZooKeeper, and no broker "
                    f"made them within {GROUP_NODES_WAIT_S:g} s of this client's heartbeat "
                    f"(does the user have Group:{self.group}:Sub?)")
            time.sleep(0.05)

    def _create(self) -> None:
        try:
            self.zk.create(self.paths.group_member(self.group, self.client_id), self.node.to_bytes(),
                           acl=self._acl, ephemeral=True)
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
        except (NoNodeError, NoAuthError):
            pass            # gone already; or the user was removed, and a broker deletes it


def list_members(zk, cluster: str, group: str) -> list[str]:
    try:
        return sorted(zk.get_children(ZkPaths(cluster).group_members(group)))
    except NoNodeError:
        return []
