"""Client-side route table: which broker groups serve a topic, at which
address, with how many queues. Kept current by ZooKeeper watches (no polling):
a master that dies takes its route node with it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from duomq.client.cluster.watches import ChildrenData
from duomq.common.message import MessageQueue
from duomq.coordinator.nodes import RouteNode
from duomq.coordinator.paths import ZkPaths
from duomq.coordinator.topics import PERM_READ, PERM_WRITE

GroupRoute = RouteNode      # a topic's route on one broker group (``nodes.RouteNode``)


@dataclass(frozen=True)
class TopicRoute:
    topic: str
    groups: dict[str, GroupRoute]
    unreadable: dict[str, str] = field(default_factory=dict)   # group -> why its node is bad
    # queues() by its arguments: a snapshot serves every send until the route changes
    _queues: dict = field(default_factory=dict, compare=False, repr=False)

    def queues(self, *, writable: bool = False, readable: bool = False) -> list[MessageQueue]:
        """The queues of the route's groups (those that take writes, or
        reads), in group order; a new list each call (its caller's own)."""
        memo = self._queues.get((writable, readable))
        if memo is None:
            memo = []
            for name in sorted(self.groups):
                r = self.groups[name]
                if writable and not r.perm & PERM_WRITE or readable and not r.perm & PERM_READ:
                    continue
                memo.extend(MessageQueue(self.topic, name, q) for q in range(r.queues))
            self._queues[(writable, readable)] = memo
        return list(memo)

    def writable_queues(self) -> tuple[list[MessageQueue], frozenset[str]]:
        """The queues that take writes (shared: callers do not change it) and
        the groups whose master cannot ack now (SYNC, too few slaves in
        sync): a producer's view, worked out once per snapshot."""
        memo = self._queues.get("send")
        if memo is None:
            memo = self._queues["send"] = (self.queues(writable=True), frozenset(
                g for g, r in self.groups.items() if not r.acks))
        return memo

    def address(self, group: str) -> str | None:
        r = self.groups.get(group)
        return r.address if r else None


class RouteTable:
    """Routes of the topics this client uses, each watched once."""

    def __init__(self, zk, cluster: str):
        self.paths = ZkPaths(cluster)
        self._listeners: list[Callable[[str], object]] = []
        self._nodes = ChildrenData(zk, RouteNode.from_bytes, self._fire)
        self._snapshots: dict[str, tuple[int, TopicRoute]] = {}   # topic -> (version, route)

    def add_listener(self, fn) -> None:
        """``fn(topic)`` after a topic's route changes (in kazoo's thread)."""
        self._listeners.append(fn)

    def get(self, topic: str, wait_s: float = 3.0) -> TopicRoute:
        """The topic's route; waits up to ``wait_s`` for a first non-empty
        answer. A snapshot shared by every caller until the route changes
        (its version moves: it is read before the data, so a change in
        between is read again next time); callers do not change it."""
        version = self._nodes.version(topic)
        hit = self._snapshots.get(topic)
        if hit is not None and hit[0] == version:
            return hit[1]
        self.watch(topic)
        route = TopicRoute(topic, self._nodes.get(topic, wait_s), self._nodes.unreadable(topic))
        if route.groups:                  # an empty one is waited for again on the next call
            self._snapshots[topic] = (version, route)
        return route

    def refresh(self, topic: str) -> None:
        """Read the topic's route from ZooKeeper now (a broker said it is stale)."""
        self.watch(topic)
        self._nodes.refresh(topic)

    def version(self, topic: str) -> int:
        """Changes of the topic's route seen so far."""
        return self._nodes.version(topic)

    def wait_change(self, topic: str, since: int, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the topic's route to change after
        ``version`` ``since`` (a dead master's route vanishing, a new one's
        appearing)."""
        return self._nodes.wait_change(topic, since, timeout_s)

    def watch(self, topic: str) -> None:
        self._nodes.watch(topic, self.paths.topic_routes(topic))

    def _fire(self, topic):
        for fn in list(self._listeners):
            fn(topic)

    def close(self) -> None:
        self._nodes.close()
