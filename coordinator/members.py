"""Client-side view of every broker group's members (address, role, offsets),
kept by watches. Reads use it to reach slaves, and keep reaching them when a
master is gone (routes vanish with the master; members do not)."""

from __future__ import annotations

from duomq.coordinator.paths import ZkPaths
from duomq.coordinator.watches import ChildrenData
from duomq.coordinator.zk import loads


class BrokerMembers:
    def __init__(self, zk, cluster: str):
        self.paths = ZkPaths(cluster)
        self._nodes = ChildrenData(zk, loads)

    def of(self, group: str) -> dict[int, dict]:
        """The group's live members by broker id."""
        self._nodes.watch(group, self.paths.members(group))
        return {int(k): v for k, v in self._nodes.get(group).items() if k.isdigit()}

    def close(self) -> None:
        self._nodes.close()


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
