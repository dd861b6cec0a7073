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
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any

from duomq.common.errors import DuomqError
from duomq.common.names import MAX_QUEUES
from duomq.common.role import Role


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


def _strs(kind: str, d: dict[str, Any], key: str, digest_ids: bool = False) -> tuple[str, ...]:
    """A list of strings (``digest_ids``: ZooKeeper digest ids, ``name:hash``);
    missing: empty."""
    value = d.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and (":" in v or not digest_ids)
                                              for v in value):
        what = "digest ids" if digest_ids else "strings"
        raise NodeError(f"{kind} node: {key!r} is {value!r}, not a list of {what}")
    return tuple(value)


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


def _role(kind: str, d: dict[str, Any], key: str, default: Role) -> Role:
    value = d.get(key, default)
    role = Role.parse(value)
    if role is None:
        raise NodeError(f"{kind} node: {key!r} is {value!r}, not MASTER or SLAVE")
    return role


_PARSERS: dict[type, Callable[..., Any]] = {int: _int, str: _str, bool: _bool, Role: _role}


def _typed(kind: str, d: dict[str, Any], fields_: dict[str, tuple[type, Any]]) -> dict[str, Any]:
    """Each of ``fields_`` (name -> (type, default)) read from ``d``."""
    return {name: _PARSERS[t](kind, d, name, default) for name, (t, default) in fields_.items()}


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
    """A live broker of the group, as it describes itself (written by the
    broker's registry every second; read by elections, clients, status)."""
    broker_id: int
    max_offset: int = 0             # end of its commit log
    epoch: int = 0                  # the epoch it leads or follows
    role: Role = Role.SLAVE
    stepping_down: bool = False     # a master handing over (planned switchover)
    promotable: bool = True         # false: a read replica, or refetching damaged data
    address: str = ""               # the client port, tcp://host:port
    group: str = ""
    ha_address: str = ""            # the replication port
    flush: str = ""                 # SYNC_FLUSH or ASYNC_FLUSH
    replication: str = ""           # SYNC or ASYNC
    max_ack_wait_ms: int = 0        # how long a send may wait for its conditions
    pid: int = 0
    version: str = ""
    data_dir: str = ""
    confirmed_offset: int = 0       # what consumers may read up to
    auth: bool = False
    public_key: str = ""            # the CURVE key it serves with (Z85), auth = true
    metrics: str = ""               # its /metrics URL, when served
    recovery: str = ""              # a recovery that cut damaged data: what it found
    master_max_offset: int = -1     # a slave: its master's end as last heard (-1: n/a)
    lag_bytes: int = -1             # a slave: bytes it lacks (-1: n/a)
    lag_ms: int = -1                # a slave: ms behind (-1: n/a, or not caught up yet)
    replication_halted: str = ""    # a slave whose replication stopped for good: why
    cannot_write: str = ""          # its store refuses writes now (a full disk): why, since when
    listen_host: str = ""           # the interface its client port binds ("": unknown)
    external_address: str = ""      # the client port as clients outside its network dial it

    @classmethod
    def from_bytes(cls, raw: bytes | None, broker_id: int | None = None) -> MemberNode:
        """``broker_id``: the node's name, which wins over its data."""
        d = decode("member", raw)
        values = _typed("member", d, _MEMBER_FIELDS)
        values["broker_id"] = broker_id if broker_id is not None \
            else _int("member", d, "broker_id")
        return cls(**values)

    def to_bytes(self) -> bytes:
        return encode({f: getattr(self, f) for f in ("broker_id", *_MEMBER_FIELDS)})

    @property
    def is_master(self) -> bool:
        return self.role is Role.MASTER


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
    """A topic's route on one broker group: where its master serves it
    (written by the master's registry, one per topic it hosts)."""
    group: str
    address: str
    queues: int
    perm: int = 6                   # read and write (topics.PERM_RW)
    epoch: int = 0
    broker_id: int = -1
    max_ack_wait_ms: int = 0        # a send's longest wait for its conditions
    max_frame_bytes: int = 0        # the largest request it takes (0: unknown)
    acks: bool = True               # false: SYNC with too few slaves in sync to ack now

    @classmethod
    def from_bytes(cls, raw: bytes | None) -> RouteNode:
        k = "route"
        d = decode(k, raw)
        return cls(_str(k, d, "group"), _str(k, d, "address"),
                   _count(k, d, "queues", 1, MAX_QUEUES),
                   _count(k, {"perm": 6, **d}, "perm", 0, 7), _int(k, d, "epoch", 0),
                   _int(k, d, "broker_id", -1), _int(k, d, "max_ack_wait_ms", 0),
                   _int(k, d, "max_frame_bytes", 0), _bool(k, d, "acks", True))

    def to_bytes(self) -> bytes:
        return encode(asdict(self))


_TYPES = {"int": int, "str": str, "bool": bool, "Role": Role}
# every field of a member node but its id (its name): type and default, for parsing
_MEMBER_FIELDS: dict[str, tuple[type, Any]] = {
    f.name: (_TYPES[str(f.type)], f.default) for f in fields(MemberNode) if f.name != "broker_id"}
