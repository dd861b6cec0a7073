"""Topic configuration in ZooKeeper and the admin operations on it."""

from __future__ import annotations

from dataclasses import dataclass, field

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from duomq.common.errors import ConfigError, TopicNotExistError
from duomq.common.names import MAX_QUEUES, NAME_RE, SYSTEM_PREFIXES, validate_name
from duomq.coordinator.nodes import NodeError, decode, encode
from duomq.coordinator.paths import ZkPaths

PERM_READ = 4
PERM_WRITE = 2
PERM_RW = PERM_READ | PERM_WRITE
MAX_QUEUES_PER_GROUP = MAX_QUEUES


@dataclass(frozen=True)
class TopicConfig:
    name: str
    queues: dict[str, int] = field(default_factory=dict)   # broker group -> queue count
    perm: int = PERM_RW
    order: bool = False

    def to_bytes(self) -> bytes:
        return encode({"queues": self.queues, "perm": self.perm, "order": self.order})

    @classmethod
    def from_bytes(cls, name: str, raw: bytes | None) -> TopicConfig:
        """Parse a topic node; ``nodes.NodeError`` names what is wrong (a
        queue count that is not 1..MAX_QUEUES, a bad group name, ...)."""
        d = decode("topic", raw)
        queues = d.get("queues", {})
        if not isinstance(queues, dict):
            raise NodeError(f"topic node {name}: 'queues' is {queues!r}, not an object")
        for group, n in queues.items():
            if not NAME_RE.fullmatch(group):
                raise NodeError(f"topic node {name}: {group!r} is not a broker group name")
            if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_QUEUES:
                raise NodeError(f"topic node {name}: queue count {n!r} of group {group!r} is "
                                f"not 1..{MAX_QUEUES}")
        perm, order = d.get("perm", PERM_RW), d.get("order", False)
        if perm not in range(8) or isinstance(perm, bool) or not isinstance(order, bool):
            raise NodeError(f"topic node {name}: perm {perm!r} or order {order!r} is invalid")
        return cls(name, dict(queues), perm, order)

    @property
    def total_queues(self) -> int:
        return sum(self.queues.values())


def _check_queues(queues: dict[str, int]) -> None:
    if not queues:
        raise ConfigError("a topic needs at least one broker group (none is registered: "
                          "start a broker first, or name groups explicitly)")
    for group, n in queues.items():
        validate_name("broker group", group)
        if not isinstance(n, int) or not 1 <= n <= MAX_QUEUES_PER_GROUP:
            raise ConfigError(f"queue count for group {group!r} must be 1..{MAX_QUEUES_PER_GROUP}, "
                              f"got {n!r}")


class TopicAdmin:
    """Create, update, delete, describe and list topics."""

    def __init__(self, zk, cluster: str):
        self.zk = zk
        self.paths = ZkPaths(cluster)

    def broker_groups(self) -> list[str]:
        try:
            return sorted(self.zk.get_children(self.paths.brokers))
        except NoNodeError:
            return []

    def _resolve(self, queues: int | dict[str, int], groups: list[str] | None) -> dict[str, int]:
        if isinstance(queues, dict):
            return dict(queues)
        return {g: queues for g in (groups or self.broker_groups())}

    def create(self, name: str, queues: int | dict[str, int] = 8, groups: list[str] | None = None,
               *, order: bool = False, perm: int = PERM_RW) -> TopicConfig:
        validate_name("topic", name)
        cfg = TopicConfig(name, self._resolve(queues, groups), perm, order)
        _check_queues(cfg.queues)
        self.zk.ensure_path(self.paths.topics)
        try:
            self.zk.create(self.paths.topic(name), cfg.to_bytes())
        except NodeExistsError:
            raise ConfigError(f"topic {name!r} already exists (use update)") from None
        return cfg

    def ensure_system(self, name: str, groups: list[str], queues: int = 1) -> TopicConfig:
        """A consumer group's ``%RETRY%`` or ``%DLQ%`` topic, with ``queues`` on
        each of ``groups`` (created, or extended to groups it lacks; never
        shrunk). Safe to race: every consumer of a group calls it at start."""
        validate_name("topic", name, allow_system=True)
        if not name.startswith(SYSTEM_PREFIXES):
            raise ConfigError(f"{name!r} is not a retry or dead-letter topic")
        self.zk.ensure_path(self.paths.topics)
        while True:
            try:
                old, stat = self._get(name)
            except TopicNotExistError:
                cfg = TopicConfig(name, {g: queues for g in groups})
                _check_queues(cfg.queues)
                try:
                    self.zk.create(self.paths.topic(name), cfg.to_bytes())
                    return cfg
                except NodeExistsError:
                    continue
            missing = {g: queues for g in groups if g not in old.queues}
            if not missing:
                return old
            cfg = TopicConfig(name, {**old.queues, **missing}, old.perm, old.order)
            try:
                self.zk.set(self.paths.topic(name), cfg.to_bytes(), version=stat.version)
                return cfg
            except BadVersionError:
                continue

    def update(self, name: str, queues: int | dict[str, int] | None = None,
               groups: list[str] | None = None, *, order: bool | None = None,
               perm: int | None = None) -> TopicConfig:
        """Change queue counts (per group), the broker groups and flags, and
        nothing else. ``groups`` is the topic's list of broker groups from
        now on (a group left out loses the topic's queues; a new one gets
        ``queues``, else the topic's largest count); ``queues`` alone
        changes the count on the groups the topic has. Shrinking a group's
        queue count hides its higher queues from producers; their data stays
        readable."""
        validate_name("topic", name)
        while True:
            old, stat = self._get(name)
            new_queues = dict(old.queues)
            if isinstance(queues, dict):
                new_queues.update(queues)
            elif groups is not None:
                default = queues if queues is not None else max(old.queues.values())
                new_queues = {g: queues if queues is not None else old.queues.get(g, default)
                              for g in groups}
            elif queues is not None:
                new_queues = {g: queues for g in old.queues}
            cfg = TopicConfig(name, new_queues, old.perm if perm is None else perm,
                              old.order if order is None else order)
            _check_queues(cfg.queues)
            try:
                self.zk.set(self.paths.topic(name), cfg.to_bytes(), version=stat.version)
                return cfg
            except BadVersionError:
                continue

    def drop_group(self, group: str) -> list[str]:
        """Take broker group ``group`` off every topic that has it (a topic
        left with no group keeps it: it cannot be served by none); the
        topics changed."""
        changed = []
        for name in self.list():
            while True:
                try:
                    old, stat = self._get(name)
                except TopicNotExistError:
                    break
                if group not in old.queues or len(old.queues) == 1:
                    break
                cfg = TopicConfig(name, {g: n for g, n in old.queues.items() if g != group},
                                  old.perm, old.order)
                try:
                    self.zk.set(self.paths.topic(name), cfg.to_bytes(), version=stat.version)
                    changed.append(name)
                    break
                except BadVersionError:
                    continue
        return changed

    def delete(self, name: str) -> None:
        validate_name("topic", name)
        try:
            self.zk.delete(self.paths.topic(name))
        except NoNodeError:
            raise TopicNotExistError(f"topic {name!r} does not exist") from None

    def describe(self, name: str) -> TopicConfig:
        validate_name("topic", name, allow_system=True)
        return self._get(name)[0]

    def _get(self, name: str):
        try:
            raw, stat = self.zk.get(self.paths.topic(name))
        except NoNodeError:
            raise TopicNotExistError(f"topic {name!r} does not exist") from None
        return TopicConfig.from_bytes(name, raw), stat

    def list(self) -> list[str]:
        try:
            return sorted(self.zk.get_children(self.paths.topics))
        except NoNodeError:
            return []
