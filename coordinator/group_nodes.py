"""The znodes of consumer groups, each a frozen dataclass with ``to_bytes`` /
``from_bytes`` (pure, as ``nodes``); written and read by clients and the
CLI. Paths are in ``paths.ZkPaths``.

  kind          path (under /duomq/<cluster>/groups/<group>)   written by
  group member  members/<client_id> (ephemeral)                 each push consumer
  queue owner   owners/<topic>@<broker group>@<queue> (ephem.)  the consumer holding it
  offset reset  resets/<topic>                                   ``duomq group reset``
  group access  (the group's own node, secured clusters)        brokers (``auth.zk_keeper``)
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from duomq.common.message import MessageQueue
from duomq.coordinator.nodes import NodeError, _int, _str, _strs, decode, encode

MAX_OWNER_ID_BYTES = 1024        # a queue owner's client id, as read back


@dataclass(frozen=True)
class GroupAccessNode:
    """Who may read what a secured cluster's clients make in a group: the
    ZooKeeper digest ids of the brokers' principal and of the group's users.
    ZooKeeper shows a client an ACL's digest ids only as ``user:x``, so a
    client learns them here to give the nodes it makes their ACL."""
    admins: tuple[str, ...] = ()
    readers: tuple[str, ...] = ()

    @classmethod
    def from_bytes(cls, raw: bytes | None) -> GroupAccessNode:
        k = "group access"
        d = decode(k, raw)
        return cls(_strs(k, d, "admins", digest_ids=True), _strs(k, d, "readers", digest_ids=True))

    def to_bytes(self) -> bytes:
        return encode({"admins": list(self.admins), "readers": list(self.readers)})


@dataclass(frozen=True)
class GroupMemberNode:
    """A live push consumer of the group: what it subscribes to."""
    topic: str
    model: str = "CLUSTERING"            # CLUSTERING or BROADCASTING

    @classmethod
    def from_bytes(cls, raw: bytes | None) -> GroupMemberNode:
        d = decode("group member", raw)
        return cls(_str("group member", d, "topic"),
                   _str("group member", d, "model", "CLUSTERING"))

    def to_bytes(self) -> bytes:
        return encode({"topic": self.topic, "model": self.model})


@dataclass(frozen=True)
class QueueOwnerNode:
    """Who holds a queue of the group: its client id, as plain text (the
    node's owner session is what counts; the text is for people)."""
    client_id: str

    @classmethod
    def from_bytes(cls, raw: bytes | None) -> QueueOwnerNode:
        return cls((raw or b"")[:MAX_OWNER_ID_BYTES].decode(errors="replace"))

    def to_bytes(self) -> bytes:
        return self.client_id.encode()


@dataclass(frozen=True)
class OffsetResetNode:
    """A reset of the group's offsets of one topic, for its live members
    (``id``: fresh per reset, so a member applies each once)."""
    topic: str
    offsets: dict[MessageQueue, int] = field(default_factory=dict)
    timestamp_ms: int = 0
    id: str = field(default_factory=lambda: uuid.uuid4().hex)

    @classmethod
    def from_bytes(cls, raw: bytes | None) -> OffsetResetNode:
        k = "offset reset"
        d = decode(k, raw)
        topic = _str(k, d, "topic")
        queues = d.get("offsets")
        if not isinstance(queues, dict):
            raise NodeError(f"{k} node: 'offsets' is {queues!r}, not an object")
        offsets = {}
        for where, off in queues.items():
            group, _, qid = where.rpartition("/")
            if not group or not qid.isdigit() or isinstance(off, bool) or not isinstance(off, int):
                raise NodeError(f"{k} node: {where!r}: {off!r} is not <broker group>/<queue>: "
                                f"<offset>")
            offsets[MessageQueue(topic, group, int(qid))] = off
        return cls(topic, offsets, _int(k, d, "timestamp_ms", 0), _str(k, d, "id"))

    def to_bytes(self) -> bytes:
        return encode({"id": self.id, "topic": self.topic, "timestamp_ms": self.timestamp_ms,
                       "offsets": {f"{mq.broker_group}/{mq.queue_id}": off
                                   for mq, off in sorted(self.offsets.items())}})
