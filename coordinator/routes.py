"""Client-side route table: which broker groups serve a topic, at which
address, with how many queues. Kept current by ZooKeeper watches (no polling):
a master that dies takes its route node with it."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from duomq.common.message import MessageQueue
from duomq.coordinator.paths import ZkPaths
from duomq.coordinator.topics import PERM_READ, PERM_WRITE
from duomq.coordinator.zk import loads

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GroupRoute:
    group: str
    address: str
    queues: int
    perm: int
    epoch: int
    info: dict

    @classmethod
    def from_data(cls, data: dict) -> "GroupRoute":
        return cls(str(data["group"]), str(data["address"]), int(data["queues"]),
                   int(data.get("perm", PERM_READ | PERM_WRITE)), int(data.get("epoch", 0)), data)


@dataclass(frozen=True)
class TopicRoute:
    topic: str
    groups: dict[str, GroupRoute]

    def queues(self, *, writable: bool = False, readable: bool = False) -> list[MessageQueue]:
        out = []
        for name in sorted(self.groups):
            r = self.groups[name]
            if writable and not r.perm & PERM_WRITE or readable and not r.perm & PERM_READ:
                continue
            out.extend(MessageQueue(self.topic, name, q) for q in range(r.queues))
        return out

    def address(self, group: str) -> str | None:
        r = self.groups.get(group)
        return r.address if r else None


class RouteTable:
    """Routes of the topics this client uses, each watched once."""

    def __init__(self, zk, cluster: str):
        self.zk = zk
        self.paths = ZkPaths(cluster)
        self._routes: dict[str, dict[str, GroupRoute]] = {}
        self._watched_children: set[str] = set()
        self._watched_nodes: set[tuple[str, str]] = set()
        self._cond = threading.Condition()
        self._listeners = []
        self._closed = False

    def add_listener(self, fn) -> None:
        """``fn(topic)`` after a topic's route changes (in kazoo's thread)."""
        self._listeners.append(fn)

    def get(self, topic: str, wait_s: float = 3.0) -> TopicRoute:
        """The topic's route; waits up to ``wait_s`` for a first non-empty answer."""
        self.watch(topic)
        with self._cond:
            self._cond.wait_for(lambda: self._routes.get(topic), timeout=wait_s)
            return TopicRoute(topic, dict(self._routes.get(topic, {})))

    def watch(self, topic: str) -> None:
        with self._cond:
            if topic in self._watched_children:
                return
            self._watched_children.add(topic)
            self._routes.setdefault(topic, {})
        path = self.paths.topic_routes(topic)
        self.zk.ensure_path(path)
        ChildrenWatch(self.zk, path, lambda children: self._on_children(topic, children))

    def _on_children(self, topic, children):
        if self._closed:
            return False
        for group in children:
            key = (topic, group)
            if key not in self._watched_nodes:
                self._watched_nodes.add(key)
                DataWatch(self.zk, self.paths.route(topic, group), self._node_watcher(topic, group))
        with self._cond:
            gone = set(self._routes.get(topic, {})) - set(children)
            for g in gone:
                self._routes[topic].pop(g, None)
            self._cond.notify_all()
        if gone:
            self._fire(topic)
        return True

    def _node_watcher(self, topic, group):
        return lambda data, stat: self._on_node(topic, group, data)  # see registry.py

    def _on_node(self, topic, group, data):
        if self._closed:
            return False
        with self._cond:
            routes = self._routes.setdefault(topic, {})
            if data is None:
                routes.pop(group, None)
            else:
                try:
                    routes[group] = GroupRoute.from_data(loads(data))
                except (KeyError, ValueError, TypeError):
                    log.warning("bad route node %s/%s ignored", topic, group)
            self._cond.notify_all()
        self._fire(topic)
        return True

    def _fire(self, topic):
        for fn in list(self._listeners):
            try:
                fn(topic)
            except Exception:
                log.exception("route listener failed")

    def close(self) -> None:
        self._closed = True
