"""Client-side view of every broker group's members (address, role, offsets),
kept by watches. Reads use it to reach slaves, and keep reaching them when a
master is gone (routes vanish with the master; members do not)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from duomq.client.cluster.watches import ChildrenData
from duomq.coordinator.nodes import MemberNode
from duomq.coordinator.paths import ZkPaths

Members = dict[int, MemberNode]      # a group's live members by broker id


class BrokerMembers:
    def __init__(self, zk, cluster: str):
        self.paths = ZkPaths(cluster)
        # the id is the node's name, set when the group is read (``of``)
        self._nodes = ChildrenData(zk, lambda raw: MemberNode.from_bytes(raw, -1))
        # group -> (changes seen, members): every pull asks, the watches rarely change it
        self._parsed: dict[str, tuple[int, Members]] = {}

    def of(self, group: str) -> Members:
        """The group's live members by broker id (shared: do not modify it)."""
        version = self._nodes.version(group)
        hit = self._parsed.get(group)
        if hit is not None and hit[0] == version:
            return hit[1]
        self._nodes.watch(group, self.paths.members(group))
        # read after the version: a change between the two is seen again next time
        members = {int(k): replace(v, broker_id=int(k))       # the node's name wins
                   for k, v in self._nodes.get(group).items() if k.isdigit()}
        self._parsed[group] = (version, members)
        return members

    def refresh(self, group: str) -> None:
        """Read the group's members from ZooKeeper now (a broker said the view is stale)."""
        self._nodes.watch(group, self.paths.members(group))
        self._nodes.refresh(group)

    def served_key(self, address: str, groups: Iterable[str] = ()) -> bytes:
        """The CURVE key the broker at ``address`` serves with, as its member
        node says, among the groups watched so far and ``groups`` (b"":
        not known)."""
        for group in dict.fromkeys([*self._nodes.keys(), *groups]):
            for m in self.of(group).values():
                if m.address == address and m.public_key:
                    return m.public_key.encode()
        return b""

    def external_of(self, address: str, groups: Iterable[str] = ()) -> str:
        """The external address the broker at ``address`` registers, among
        the groups watched so far and ``groups`` ("": none known)."""
        for group in dict.fromkeys([*self._nodes.keys(), *groups]):
            for m in self.of(group).values():
                if m.address == address:
                    return m.external_address
        return ""

    def close(self) -> None:
        self._nodes.close()


def read_candidates(members: Members, read_from: str,
                    avoid: frozenset[int] = frozenset()) -> list[MemberNode]:
    """Pure: the live members in the order a read tries them.

    ``master``: the master, then slaves (so a dead master's queues still
    drain). ``slave_preferred``: slaves (the most advanced first) but those
    in ``avoid`` (broker ids that were too far behind, or unreachable, a
    moment ago), then the master, then the avoided slaves (with the master
    gone, a slave is all there is). ``slave``: slaves only, the avoided ones
    last: never the master."""
    alive = [m for _, m in sorted(members.items()) if m.address]
    # the newest epoch's master first: a dead master's node may outlive it a while
    masters = sorted((m for m in alive if m.is_master), key=lambda m: (-m.epoch, m.broker_id))
    slaves = sorted((m for m in alive if not m.is_master),
                    key=lambda m: (-m.max_offset, m.broker_id))
    if read_from == "master":
        return masters + slaves
    fresh = [m for m in slaves if m.broker_id not in avoid]
    avoided = [m for m in slaves if m.broker_id in avoid]
    if read_from == "slave_preferred":
        return fresh + masters + avoided
    return fresh + avoided


def read_target(members: Members, read_from: str, advice: int | None = None,
                avoid: frozenset[int] = frozenset()) -> MemberNode | None:
    """Pure: the member a read goes to: the first of ``read_candidates``, or
    ``advice`` (a broker id the brokers suggested for this queue) while it is alive."""
    advised = members.get(advice) if advice is not None else None
    if advised is not None and advised.address:
        return advised
    candidates = read_candidates(members, read_from, avoid)
    return candidates[0] if candidates else None
