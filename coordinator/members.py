"""Client-side view of every broker group's members (address, role, offsets),
kept by watches. Reads use it to reach slaves, and keep reaching them when a
master is gone (routes vanish with the master; members do not)."""

from __future__ import annotations

import logging
import threading

from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from duomq.coordinator.paths import ZkPaths
from duomq.coordinator.zk import loads

log = logging.getLogger(__name__)


class BrokerMembers:
    def __init__(self, zk, cluster: str):
        self.zk = zk
        self.paths = ZkPaths(cluster)
        self._members: dict[str, dict[int, dict]] = {}
        self._watched: set[str] = set()
        self._nodes: set[tuple[str, int]] = set()
        self._lock = threading.Lock()
        self._closed = False

    def watch(self, group: str) -> None:
        with self._lock:
            if group in self._watched:
                return
            self._watched.add(group)
            self._members.setdefault(group, {})
        self.zk.ensure_path(self.paths.members(group))
        ChildrenWatch(self.zk, self.paths.members(group),
                      lambda children: self._on_children(group, children))

    def _on_children(self, group, children):
        if self._closed:
            return False
        ids = {int(c) for c in children if c.isdigit()}
        with self._lock:
            for gone in set(self._members.get(group, {})) - ids:
                self._members[group].pop(gone, None)
        for i in ids:
            if (group, i) not in self._nodes:
                self._nodes.add((group, i))
                DataWatch(self.zk, self.paths.member(group, i), self._node_watcher(group, i))
        return True

    def _node_watcher(self, group, broker_id):
        return lambda data, stat: self._on_node(group, broker_id, data)

    def _on_node(self, group, broker_id, data):
        if self._closed:
            return False
        with self._lock:
            if data is None:
                self._members.get(group, {}).pop(broker_id, None)
            else:
                self._members.setdefault(group, {})[broker_id] = loads(data)
        return True

    def of(self, group: str) -> dict[int, dict]:
        self.watch(group)
        with self._lock:
            return dict(self._members.get(group, {}))

    def close(self) -> None:
        self._closed = True


def read_target(members: dict[int, dict], read_from: str, advice: int | None = None) -> dict | None:
    """Pure: the member a read goes to. ``read_from``: ``master`` (fall back to a
    slave only when no master is alive, so a dead master's queues still drain),
    ``slave`` or ``slave_preferred`` (a live slave, else the master). ``advice``:
    a broker id the brokers suggested for this queue, followed while it is alive."""
    alive = {i: m for i, m in members.items() if m.get("address")}
    if advice is not None and advice in alive:
        return alive[advice]
    masters = [m for i, m in sorted(alive.items()) if m.get("role") == "MASTER"]
    slaves = [m for i, m in sorted(alive.items()) if m.get("role") == "SLAVE"]
    if read_from in ("slave", "slave_preferred") and slaves:
        return max(slaves, key=lambda m: (m.get("max_offset", 0), -m.get("broker_id", 0)))
    if masters:
        return masters[0]
    return max(slaves, key=lambda m: m.get("max_offset", 0)) if slaves else None
