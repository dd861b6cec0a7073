"""Users' policies in RocketMQ ACL 2.0's terms (pure), and what each
request type needs (``NEEDS``: every request a client may send is in it).

A permission is ``Type:Name:Action``: Type ``Topic``, ``Group`` or
``Cluster``; Name a resource name, ``*``, or a prefix ending in ``*``;
Action one the broker checks on that type (``CHECKED``) or ``All``. A policy
is a list of allowed and a list of denied permissions: a request is allowed
when every permission it needs is matched by an allow entry and by no deny
entry (deny wins, as in RocketMQ).

The broker's own topics (``names.INTERNAL_TOPICS``: delayed messages, half
messages, the share log) and every group's retry and dead-letter topics are
*reserved*: no entry covers them, whatever its name (``*``, ``R*``,
``%DLQ%*``, the name itself) and for every user (the admin's ``Topic:*:All``
too). A group reads its own retry and dead-letter topics with its group's
permission alone; nothing else may read or write any of them.

Some needs depend on what the request touches, not only on its fields: a
send back needs ``Sub`` on the topic of the stored message it names, a read
of a message by its offset ``Sub`` on that message's topic, and a
transaction's check-back goes only to producers whose user may ``Pub`` on
its topic. The handlers check those (``BrokerCore.require``) once they have
read the message.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from duomq.common.errors import ConfigError
from duomq.common.names import DLQ_PREFIX, RETRY_PREFIX, SYSTEM_PREFIXES, reserved
from duomq.proto import pb

log = logging.getLogger(__name__)

TYPES = ("Topic", "Group", "Cluster")
# a name, a prefix ending in *, or * (a group's retry and dead-letter topics are
# granted with the group: Topic entries naming them are refused, ``reserved``)
NAME_PATTERN = re.compile(r"\*|(%RETRY%|%DLQ%)?[A-Za-z0-9_-]{1,127}\*?|(%RETRY%|%DLQ%)\*")
# the actions the broker checks, by resource type (``NEEDS`` below)
CHECKED = {"Topic": ("Pub", "Sub"), "Group": ("Sub", "Delete"), "Cluster": ("Get", "Admin")}
ACTIONS = ("Pub", "Sub", "Delete", "Get", "Admin", "All")
# accepted by earlier releases and never checked: a stored policy naming one
# loses that entry (it granted nothing), a new one is refused
RETIRED = ("Create", "Update", "List")


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
        if action != "All" and action not in CHECKED.get(type_, ()):
            checked = ", ".join(CHECKED[type_])
            why = "is not an action" if action not in ACTIONS + RETIRED else \
                f"is never checked on a {type_}"
            raise ConfigError(f"permission {text!r}: action {action!r} {why}: a {type_} "
                              f"permission takes {checked} or All")
        if not NAME_PATTERN.fullmatch(name):
            raise ConfigError(f"permission {text!r}: name {name!r} is not a name, a "
                              f"prefix ending in *, or *")
        if type_ == "Topic" and (reserved(name) or name.startswith(SYSTEM_PREFIXES)):
            raise ConfigError(f"permission {text!r}: {name!r} names the broker's own topics "
                              f"or groups' retry and dead-letter topics, which no policy "
                              f"grants (a group reads its own with Group:<group>:Sub)")
        return cls(type_, name, action)

    def __str__(self) -> str:
        return f"{self.type}:{self.name}:{self.action}"

    def covers(self, needed: Permission) -> bool:
        """Whether this entry matches ``needed`` (a concrete permission). A
        reserved topic is matched by no entry."""
        if self.type != needed.type or self.action not in (needed.action, "All"):
            return False
        if needed.type == "Topic" and reserved(needed.name):
            return False
        if self.name.endswith("*"):
            return needed.name.startswith(self.name[:-1])
        return self.name == needed.name


@dataclass(frozen=True)
class Policy:
    allow: tuple[Permission, ...] = ()
    deny: tuple[Permission, ...] = ()

    @classmethod
    def parse(cls, allow, deny=(), stored: bool = False) -> Policy:
        """``stored``: a policy read back from ZooKeeper, where an entry
        naming an action earlier releases accepted but never checked, or a
        reserved topic (granted by earlier releases), is dropped instead of
        refusing the whole user."""
        def entries(texts):
            out = []
            for text in texts:
                try:
                    out.append(Permission.parse(text))
                except ConfigError as exc:
                    if not (stored and ("is never checked" in str(exc)
                                        or "which no policy grants" in str(exc))):
                        raise
                    log.warning("%s: the entry is ignored", exc)
            return tuple(out)
        return cls(entries(allow), entries(deny))

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


Need = Callable[[Any, str], list[Permission]]


def _offsets(queues, group: str) -> list[Permission]:
    return _unique([p for q in queues for p in _topic_sub(q.topic, group)]
                   or [Permission("Group", group, "Sub")])


def _end_transaction(m, cluster: str) -> list[Permission]:
    """A producer's end: Pub on the topic (the broker checks that the half
    message is of that topic and that producer group); an operator's: Admin."""
    return [Permission("Topic", m.topic, "Pub")] if m.producer_group else \
        [Permission("Cluster", cluster, "Admin")]


# Every request type a client may send, and what it needs (pure). A
# heartbeat needs Sub on the consumer groups it names (a master then creates
# their retry and dead-letter topics); naming producer groups needs nothing,
# since a check-back reaches only users with Pub on its topic.
NEEDS: dict[int, Need] = {
    pb.SEND: lambda m, c: [Permission("Topic", m.topic, "Pub")],
    pb.PULL: lambda m, c: _topic_sub(m.topic, m.consumer_group),
    pb.PULL_MANY: lambda m, c: _unique([p for q in m.pulls
                                        for p in _topic_sub(q.topic, q.consumer_group)]),
    pb.QUERY_OFFSET: lambda m, c: _topic_sub(m.topic, m.consumer_group) if m.consumer_group
    else [Permission("Topic", m.topic, "Sub")],
    pb.QUERY_BY_KEY: lambda m, c: [Permission("Topic", m.topic, "Sub")],
    pb.COMMIT_OFFSET: lambda m, c: _offsets(m.offsets, m.consumer_group),
    pb.FETCH_OFFSET: lambda m, c: _offsets(m.queues, m.consumer_group),
    pb.LOCK_QUEUES: lambda m, c: _offsets(m.queues, m.consumer_group),
    pb.UNLOCK_QUEUES: lambda m, c: _offsets(m.queues, m.consumer_group),
    pb.HEARTBEAT: lambda m, c: _unique([Permission("Group", g, "Sub")
                                        for g in m.consumer_groups]),
    # and Sub on the stored message's own topic (the handler reads it)
    pb.SEND_BACK: lambda m, c: [Permission("Group", m.consumer_group, "Sub")],
    pb.GET_MESSAGE: lambda m, c: [Permission("Cluster", c, "Get")],     # and, ditto
    pb.BROKER_STATUS: lambda m, c: [Permission("Cluster", c, "Get")],
    pb.LIST_TRANSACTIONS: lambda m, c: [Permission("Cluster", c, "Get")],
    pb.END_TRANSACTION: _end_transaction,
    pb.DELETE_GROUP: lambda m, c: [Permission("Group", m.consumer_group, "Delete")],
    pb.BROKER_CONFIG: lambda m, c: [Permission("Cluster", c, "Admin" if m.set else "Get")],
    pb.POP: lambda m, c: _topic_sub(m.topic, m.consumer_group),
    pb.SHARE_ACK: lambda m, c: _topic_sub(m.topic, m.consumer_group),
    pb.RECALL: lambda m, c: [Permission("Topic", m.topic, "Pub")],
}
# the same, as README's security table says it (a test keeps them one)
RULES: dict[int, str] = {
    pb.SEND: "Topic:T:Pub",
    pb.PULL: "Topic:T:Sub, Group:G:Sub (the group's own retry and dead-letter topics: "
             "Group:G:Sub alone)",
    pb.PULL_MANY: "what each of its pulls needs",
    pb.QUERY_OFFSET: "Topic:T:Sub (naming a group: as a pull)",
    pb.QUERY_BY_KEY: "Topic:T:Sub",
    pb.COMMIT_OFFSET: "as a pull, for each queue named",
    pb.FETCH_OFFSET: "as a pull, for each queue named",
    pb.LOCK_QUEUES: "as a pull, for each queue named; a client id is its user's own (another "
                 "user naming it locks for itself)",
    pb.UNLOCK_QUEUES: "as a pull, for each queue named; a client id is its user's own (another "
                   "user naming it locks for itself)",
    pb.HEARTBEAT: "Group:G:Sub for each consumer group named; a client id is its user's own "
                  "(producer groups need nothing: a check-back goes only to users with "
                  "Topic:T:Pub on its message's topic)",
    pb.SEND_BACK: "Group:G:Sub, and Sub on the stored message's own topic (never the "
                  "broker's own topics, nor another group's retry or dead-letter topic)",
    pb.GET_MESSAGE: "Cluster:C:Get, and Topic:T:Sub on the message's topic (of the named "
                    "group's own retry or dead-letter topic: Group:G:Sub)",
    pb.BROKER_STATUS: "Cluster:C:Get",
    pb.LIST_TRANSACTIONS: "Cluster:C:Get",
    pb.END_TRANSACTION: "a producer's: Topic:T:Pub on the half message's topic; an "
                        "operator's (no producer group): Cluster:C:Admin",
    pb.DELETE_GROUP: "Group:G:Delete",
    pb.BROKER_CONFIG: "Cluster:C:Get to read, Cluster:C:Admin to change",
    pb.POP: "as a pull",
    pb.SHARE_ACK: "as a pull",
    pb.RECALL: "Topic:T:Pub (the handle must be of that topic)",
}
# request types no client sends: replication (its own port, the broker key
# only) and the broker's check-back push
NOT_FROM_CLIENTS = frozenset({pb.HA_REPORT, pb.HA_TRANSFER, pb.CHECK_TRANSACTION_STATE})


def needs(type_: int, m, cluster: str) -> list[Permission] | None:
    """What a client request needs; None: not a request a client may send
    (refused whatever the user's rights)."""
    need = NEEDS.get(type_)
    return None if need is None else need(m, cluster)


def topic_read(topic: str, group: str | None) -> list[Permission]:
    """Reading a stored message of ``topic`` (a send back in ``group``, or a
    read by offset without one)."""
    return _topic_sub(topic, group) if group else [Permission("Topic", topic, "Sub")]


def _unique(perms: list[Permission]) -> list[Permission]:
    return list(dict.fromkeys(perms))
