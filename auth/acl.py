"""Users' policies in RocketMQ ACL 2.0's terms (pure).

A permission is ``Type:Name:Action``: Type ``Topic``, ``Group`` or
``Cluster``; Name a resource name, ``*``, or a prefix ending in ``*``;
Action ``Pub``, ``Sub``, ``Create``, ``Update``, ``Delete``, ``Get``,
``List``, ``Admin`` or ``All``. A policy is a list of allowed and a list of
denied permissions: a request is allowed when every permission it needs is
matched by an allow entry and by no deny entry (deny wins, as in RocketMQ).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from duomq.common.errors import ConfigError
from duomq.common.names import DLQ_PREFIX, RETRY_PREFIX
from duomq.proto import pb

TYPES = ("Topic", "Group", "Cluster")
# a name (retry and dead-letter topics too), a prefix ending in *, or *
NAME_PATTERN = re.compile(r"\*|(%RETRY%|%DLQ%)?[A-Za-z0-9_-]{1,127}\*?|(%RETRY%|%DLQ%)\*")
ACTIONS = ("Pub", "Sub", "Create", "Update", "Delete", "Get", "List", "Admin", "All")


@dataclass(frozen=True)
class Permission:
    type: str
    name: str
    action: str

    @classmethod
    def parse(cls, text: str) -> Permission:
        parts = str(text).split(":")
        if len(parts) != 3:
            raise ConfigError(f"permission {text!r}: expected Type:Name:Action, such as "
                              f"Topic:Orders:Pub")
        type_, name, action = (p.strip() for p in parts)
        if type_ not in TYPES:
            raise ConfigError(f"permission {text!r}: type {type_!r} is not one of "
                              f"{', '.join(TYPES)}")
        if action not in ACTIONS:
            raise ConfigError(f"permission {text!r}: action {action!r} is not one of "
                              f"{', '.join(ACTIONS)}")
        if not NAME_PATTERN.fullmatch(name):
            raise ConfigError(f"permission {text!r}: name {name!r} is not a name, a "
                              f"prefix ending in *, or *")
        return cls(type_, name, action)

    def __str__(self) -> str:
        return f"{self.type}:{self.name}:{self.action}"

    def covers(self, needed: Permission) -> bool:
        """Whether this entry matches ``needed`` (a concrete permission)."""
        if self.type != needed.type or self.action not in (needed.action, "All"):
            return False
        if self.name.endswith("*"):
            return needed.name.startswith(self.name[:-1])
        return self.name == needed.name


@dataclass(frozen=True)
class Policy:
    allow: tuple[Permission, ...] = ()
    deny: tuple[Permission, ...] = ()

    @classmethod
    def parse(cls, allow, deny=()) -> Policy:
        return cls(tuple(Permission.parse(p) for p in allow),
                   tuple(Permission.parse(p) for p in deny))

    def lacking(self, needed: list[Permission]) -> Permission | None:
        """The first permission of ``needed`` this policy does not grant."""
        for p in needed:
            if any(d.covers(p) for d in self.deny) or not any(a.covers(p) for a in self.allow):
                return p
        return None

    def to_json(self) -> dict:
        return {"allow": [str(p) for p in self.allow], "deny": [str(p) for p in self.deny]}


ADMIN = Policy.parse(["Cluster:*:All", "Topic:*:All", "Group:*:All"])


def _topic_sub(topic: str, group: str) -> list[Permission]:
    """Reading ``topic`` in ``group``: the group's own retry and dead-letter
    topics need only the group's permission (as in RocketMQ)."""
    own = topic in (RETRY_PREFIX + group, DLQ_PREFIX + group)
    return ([] if own else [Permission("Topic", topic, "Sub")]) + \
        [Permission("Group", group, "Sub")]


def needs(type_: int, m, cluster: str) -> list[Permission]:
    """The permissions a client request needs (pure). A heartbeat needs
    ``Sub`` on the consumer groups it names (a master then creates their
    retry and dead-letter topics); reads of the broker's status and of
    messages by id need ``Get`` on the cluster."""
    if type_ == pb.HEARTBEAT:
        return _unique([Permission("Group", g, "Sub") for g in m.consumer_groups])
    if type_ == pb.SEND:
        return [Permission("Topic", m.topic, "Pub")]
    if type_ == pb.PULL:
        return _topic_sub(m.topic, m.consumer_group)
    if type_ == pb.PULL_MANY:
        return _unique([p for q in m.pulls for p in _topic_sub(q.topic, q.consumer_group)])
    if type_ == pb.QUERY_OFFSET and m.consumer_group:
        return _topic_sub(m.topic, m.consumer_group)
    if type_ in (pb.QUERY_OFFSET, pb.QUERY_BY_KEY):
        return [Permission("Topic", m.topic, "Sub")]
    if type_ == pb.COMMIT_OFFSET:
        return _unique([p for q in m.offsets for p in _topic_sub(q.topic, m.consumer_group)]
                       or [Permission("Group", m.consumer_group, "Sub")])
    if type_ == pb.FETCH_OFFSET:
        return _unique([p for q in m.queues for p in _topic_sub(q.topic, m.consumer_group)]
                       or [Permission("Group", m.consumer_group, "Sub")])
    if type_ in (pb.LOCK_QUEUES, pb.UNLOCK_QUEUES):
        return _unique([p for q in m.queues for p in _topic_sub(q.topic, m.consumer_group)]
                       or [Permission("Group", m.consumer_group, "Sub")])
    if type_ == pb.SEND_BACK:
        return [Permission("Group", m.consumer_group, "Sub")]
    if type_ in (pb.BROKER_STATUS, pb.GET_MESSAGE, pb.LIST_TRANSACTIONS):
        return [Permission("Cluster", cluster, "Get")]
    if type_ == pb.END_TRANSACTION:      # a producer's: Pub on the topic; an operator's: Admin
        return [Permission("Topic", m.topic, "Pub")] if m.producer_group else \
            [Permission("Cluster", cluster, "Admin")]
    if type_ == pb.DELETE_GROUP:
        return [Permission("Group", m.consumer_group, "Delete")]
    if type_ == pb.BROKER_CONFIG:        # reading the settings, or changing them
        return [Permission("Cluster", cluster, "Admin" if m.set else "Get")]
    return []


def _unique(perms: list[Permission]) -> list[Permission]:
    return list(dict.fromkeys(perms))
