"""The contents of duomq's znodes, each kind parsed once into a frozen
dataclass (as Patroni's ``Member.from_node``); pure, no ZooKeeper calls.

Node data is a JSON object. ``from_bytes`` raises ``NodeError`` naming the
node kind and the field when a node is not JSON, not an object, or holds a
field of the wrong type; a missing optional field takes its default. Paths
are in ``paths.ZkPaths``.

  kind        path (under /duomq/<cluster>/brokers/<group>)   written by
  master      master (ephemeral)                               the master's controller (claim)
  member      members/<broker_id> (ephemeral)                  each broker (registry)
  isr         isr                                               the master's controller
  epoch       epochs/<epoch, 10 digits>                         the controller that claimed it
  switchover  switchover                                        ``duomq failover``
  route       /duomq/<cluster>/routes/<topic>/<group>          the master (registry)
  topic       /duomq/<cluster>/topics/<topic>                  ``duomq topic`` (TopicConfig)

Anyone who reaches ZooKeeper can write any node, so every reader treats a node
it cannot parse as absent (or, for the master node, as held by an unknown
broker), logs it with its path, and goes on: one bad node never stops a
broker from starting, an HA cycle from deciding or a client from routing.
Counts are bounded (a route's queues by ``names.MAX_QUEUES``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from duomq.common.errors import DuomqError
from duomq.common.names import MAX_QUEUES


class NodeError(DuomqError, ValueError):
    """A znode whose data cannot be read as its kind."""


def decode(kind: str, raw: bytes | None) -> dict[str, Any]:
    """The JSON object of a node (empty data reads as {})."""
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        raise NodeError(f"{kind} node: data is not JSON") from None
    if not isinstance(value, dict):
        raise NodeError(f"{kind} node: data is a JSON {type(value).__name__}, not an object")
    return value


def encode(data: dict[str, Any]) -> bytes:
    return json.dumps(data, sort_keys=True).encode()


def _int(kind: str, d: dict[str, Any], key: str, default: int | None = None) -> int:
    value = d.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        if value is None:
            raise NodeError(f"{kind} node: {key!r} is missing")
        raise NodeError(f"{kind} node: {key!r} is {value!r}, not an integer")
    return value


def _str(kind: str, d: dict[str, Any], key: str, default: str | None = None) -> str:
    value = d.get(key, default)
    if not isinstance(value, str):
        if value is None:
            raise NodeError(f"{kind} node: {key!r} is missing")
        raise NodeError(f"{kind} node: {key!r} is {value!r}, not a string")
    return value


def _count(kind: str, d: dict[str, Any], key: str, low: int, high: int) -> int:
    value = _int(kind, d, key)
    if not low <= value <= high:
        raise NodeError(f"{kind} node: {key!r} is {value}, outside {low}..{high}")
    return value


def _bool(kind: str, d: dict[str, Any], key: str, default: bool) -> bool:
    value = d.get(key, default)
    if not isinstance(value, bool):
        raise NodeError(f"{kind} node: {key!r} is {value!r}, not true or false")
    return value


UNKNOWN_HOLDER = -1    # a master node that exists but cannot be read


@dataclass(frozen=True)
class MasterNode:
    """The group's master: its holder, epoch and addresses."""
    broker_id: int
    epoch: int
    address: str = ""
    ha_address: str = ""

    @classmethod
    def unreadable(cls) -> MasterNode:
        """A master node that exists but cannot be parsed: held, by whom is
        unknown. Nobody may claim the group while it exists (its holder's
        session still does), and nobody follows it."""
        return cls(UNKNOWN_HOLDER, UNKNOWN_HOLDER)

    @property
    def known(self) -> bool:
        return self.broker_id != UNKNOWN_HOLDER

    @classmethod
    def from_bytes(cls, raw: bytes | None) -> MasterNode:
        d = decode("master", raw)
        return cls(_int("master", d, "broker_id"), _int("master", d, "epoch", 0),
                   _str("master", d, "address", ""), _str("master", d, "ha_address", ""))

    def to_bytes(self) -> bytes:
        return encode({"broker_id": self.broker_id, "epoch": self.epoch,
                       "address": self.address, "ha_address": self.ha_address})


@dataclass(frozen=True)
class MemberNode:
    """A live broker of the group. The election reads the typed fields;
    ``info`` keeps the whole node for status displays."""
    broker_id: int
    max_offset: int = 0
    epoch: int = 0
    role: str = "SLAVE"
    stepping_down: bool = False     # a master handing over (planned switchover)
    promotable: bool = True         # false: a read replica
    address: str = ""
    info: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @classmethod
    def from_bytes(cls, raw: bytes | None, broker_id: int | None = None) -> MemberNode:
        """``broker_id``: the node's name, which wins over its data."""
        k = "member"
        d = decode(k, raw)
        bid = broker_id if broker_id is not None else _int(k, d, "broker_id")
        return cls(bid, _int(k, d, "max_offset", 0), _int(k, d, "epoch", 0),
                   _str(k, d, "role", "SLAVE"), _bool(k, d, "stepping_down", False),
                   _bool(k, d, "promotable", True), _str(k, d, "address", ""), d)


@dataclass(frozen=True)
class IsrNode:
    """The in-sync set: brokers holding every acknowledged message."""
    epoch: int
    master: int
    members: frozenset[int]

    @classmethod
    def from_bytes(cls, raw: bytes | None) -> IsrNode:
        d = decode("isr", raw)
        members = d.get("members", [])
        if not isinstance(members, list) or not all(
                isinstance(m, int) and not isinstance(m, bool) for m in members):
            raise NodeError(f"isr node: 'members' is {members!r}, not a list of broker ids")
        return cls(_int("isr", d, "epoch", 0), _int("isr", d, "master", -1), frozenset(members))

    def to_bytes(self) -> bytes:
        return encode({"epoch": self.epoch, "master": self.master,
                       "members": sorted(self.members)})


@dataclass(frozen=True)
class EpochNode:
    """One epoch of the group's history: who led it from which log offset."""
    epoch: int
    broker_id: int
    start_offset: int

    @classmethod
    def from_bytes(cls, epoch: int, raw: bytes | None) -> EpochNode:
        d = decode("epoch", raw)
        return cls(epoch, _int("epoch", d, "broker_id", -1), _int("epoch", d, "start_offset", 0))

    def to_bytes(self) -> bytes:
        return encode({"broker_id": self.broker_id, "start_offset": self.start_offset})


@dataclass(frozen=True)
class SwitchoverNode:
    """A planned switchover asked by ``duomq failover``: from the master
    ``source`` (None: whoever is master) to ``target`` (None: the best slave)."""
    source: int | None = None
    target: int | None = None
    requested_at: float = 0.0

    @classmethod
    def from_bytes(cls, raw: bytes | None) -> SwitchoverNode:
        d = decode("switchover", raw)
        source = d.get("from")
        target = d.get("target")
        for key, value in (("from", source), ("target", target)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise NodeError(f"switchover node: {key!r} is {value!r}, not a broker id")
        at = d.get("requested_at", 0.0)
        if isinstance(at, bool) or not isinstance(at, int | float):
            raise NodeError(f"switchover node: 'requested_at' is {at!r}, not a time")
        return cls(source, target, float(at))

    def to_bytes(self) -> bytes:
        data: dict[str, Any] = {"from": self.source, "requested_at": self.requested_at}
        if self.target is not None:
            data["target"] = self.target
        return encode(data)


@dataclass(frozen=True)
class RouteNode:
    """A topic's route on one broker group: where its master serves it."""
    group: str
    address: str
    queues: int
    perm: int
    epoch: int
    info: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @classmethod
    def from_bytes(cls, raw: bytes | None) -> RouteNode:
        k = "route"
        d = decode(k, raw)
        perm = _count(k, {"perm": 6, **d}, "perm", 0, 7)        # default: read and write
        return cls(_str(k, d, "group"), _str(k, d, "address"),
                   _count(k, d, "queues", 1, MAX_QUEUES), perm, _int(k, d, "epoch", 0), d)
