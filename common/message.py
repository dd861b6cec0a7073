"""Messages as users see them: ``Message`` to send, ``MessageExt`` received
(``decode_records`` makes them from stored records), ``MessageQueue``."""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass
from typing import Any, NamedTuple

from duomq.common.errors import BadRequestError
from duomq.common.idempotence import SEQUENCING
from duomq.format import native
from duomq.format import record as rec
from duomq.format.record import make_msg_id, parse_msg_id, parse_msg_id_epoch, record_epoch
from duomq.proto import pb

__all__ = ["Message", "MessageExt", "MessageQueue", "PullStatus", "decode_records", "lookup_key",
           "make_msg_id", "parse_msg_id", "parse_msg_id_epoch"]


@dataclass(init=False, slots=True)
class Message:
    """A message to send.

    ``body``: bytes (a str is encoded as UTF-8); ``keys``: one or more keys (a
    string with keys separated by spaces, or a list); ``tags``: one tag used
    for filtering; ``properties``: str -> str. ``delay_level`` (1..18 with the
    default levels ``1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h
    2h``, kept in properties as ``DELAY``), ``deliver_at_ms`` (epoch ms) or
    ``delay_ms`` (from now: the same as ``deliver_at_ms`` = now +
    ``delay_ms``) holds the message at the broker until then. A timer's time
    is the attribute ``deliver_at_ms`` (0: none), sent as the property
    ``DELIVER_AT`` (the property given in ``properties`` works too, alone).
    """

    topic: str
    body: bytes | bytearray | memoryview
    tags: str
    keys: str
    properties: dict[str, str]
    deliver_at_ms: int

    def __init__(self, topic: str, body: bytes | bytearray | memoryview | str, tags: str = "",
                 keys: str | list[str] = "", properties: dict[str, str] | None = None,
                 delay_level: int = 0, deliver_at_ms: int = 0, delay_ms: int = 0):
        # written by hand: one call per message on the producer's hot path
        if type(body) is not bytes:
            if isinstance(body, str):
                body = body.encode()
            elif not isinstance(body, (bytes, bytearray, memoryview)):
                raise TypeError(f"body must be bytes, got {type(body).__name__}")
        if type(keys) is not str:
            if not isinstance(keys, (list, tuple)):
                raise TypeError(f"keys must be a str or a list, got {type(keys).__name__}")
            keys = " ".join(keys)
        self.topic = topic
        self.body = body
        self.tags = tags
        self.keys = keys
        self.properties = {} if properties is None else properties
        if delay_ms:
            if type(delay_ms) is not int or delay_ms < 0 or deliver_at_ms:
                _refuse_delay(delay_ms, deliver_at_ms)
            deliver_at_ms = _now_ns() // 1_000_000 + delay_ms
        elif deliver_at_ms and (type(deliver_at_ms) is not int or deliver_at_ms < 0):
            raise ValueError(f"deliver_at_ms must be epoch milliseconds, got {deliver_at_ms!r}")
        self.deliver_at_ms = deliver_at_ms
        if delay_level or (deliver_at_ms and properties and "DELIVER_AT" in properties):
            if type(delay_level) is not int or delay_level < 0:
                raise ValueError(f"delay_level must be a level >= 1, got {delay_level!r}")
            if deliver_at_ms and properties and "DELIVER_AT" in properties:
                raise ValueError("give deliver_at_ms (or delay_ms) or a DELIVER_AT property, "
                                 "not both")
            self.properties = {**self.properties, "DELAY": str(delay_level)}

    def wire_properties(self) -> dict[str, str]:
        """The properties as sent: ``properties``, and a timer's ``DELIVER_AT``."""
        if not self.deliver_at_ms:
            return self.properties
        return {**self.properties, "DELIVER_AT": str(self.deliver_at_ms)}


_now_ns = time.time_ns


def _refuse_delay(delay_ms: object, deliver_at_ms: object) -> None:
    if type(delay_ms) is not int or delay_ms < 0:        # (bool: an int, but not a delay)
        raise ValueError(f"delay_ms must be milliseconds >= 0, got {delay_ms!r}")
    raise ValueError("give deliver_at_ms or delay_ms, not both")


@dataclass(slots=True)
class MessageExt:
    """A stored message, as a consumer receives it."""

    topic: str
    body: bytes
    tags: str
    keys: str
    properties: dict[str, str]
    queue_id: int
    queue_offset: int
    physical_offset: int
    born_timestamp_ms: int
    store_timestamp_ms: int
    born_host: str
    flags: int
    broker_group: str = ""

    @property
    def epoch(self) -> int:
        """The epoch of the master that stored it (0: stored before epochs were stamped)."""
        return record_epoch(self.flags)

    @property
    def msg_id(self) -> str:
        """Broker group, the storing master's epoch and the commit-log offset:
        valid on every member of the group, and never another message's (a
        record cut at a failover and the next master's at its offset differ
        in the epoch)."""
        return make_msg_id(self.broker_group, self.physical_offset, record_epoch(self.flags))

    @property
    def reconsume_times(self) -> int:
        """How many times this message was sent back for a retry."""
        return int(self.properties.get("RECONSUME_TIME", 0) or 0)

    @property
    def key_list(self) -> list[str]:
        return self.keys.split() if self.keys else []


def lookup_key(key: str) -> str:
    """``key`` if it can be looked up by (one of a message's space-separated
    keys: one word), else BadRequestError. Clients and brokers check alike."""
    if not key or key != key.strip() or len(key.split()) != 1:
        raise BadRequestError(f"a key is one word without spaces, got {key!r}")
    return key


class PullStatus(str, enum.Enum):
    """What a read of a queue found: the store's answer, the broker's status
    on the wire (``wire``) and the client's ``PullResult.status`` alike."""

    FOUND = "FOUND"
    NO_NEW_MESSAGE = "NO_NEW_MESSAGE"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"   # all filtered out; pull on from next_offset
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"

    @property
    def wire(self) -> int:
        return pb.OK if self is PullStatus.FOUND else pb.Status.Value(self.value)

    @classmethod
    def of_wire(cls, status: int) -> PullStatus | None:
        """The pull status a wire status means, or None (an error status)."""
        if status == pb.OK:
            return cls.FOUND
        name = pb.Status.Name(status) if status in pb.Status.values() else ""
        return cls(name) if name in cls.__members__ else None


class MessageQueue(NamedTuple):
    """One queue of a topic, hosted by one broker group. A named tuple:
    hashed and compared in C, as the clients' maps look one up on every
    send and pull (issue 41: the frozen dataclass's hash and equality were
    ~3 Python calls a message), with the same hash, order and equality
    among queues."""

    topic: str
    broker_group: str
    queue_id: int

    def __str__(self):
        return f"{self.topic}@{self.broker_group}#{self.queue_id}"


def decode_records(buf, broker_group: str = "") -> list[MessageExt]:
    """Decode concatenated stored records (a pull answer) into MessageExt:
    in one C loop (``format/_native.c``'s ``decode``) when it is built and
    every record is a whole format-3 one, else record by record here (the
    reference: the tests compare both)."""
    # (properties and hosts read in C too: None for the Python readers)
    out = _decode(buf, broker_group, MessageExt, None, None, SEQUENCING)
    return out if out is not None else _decode_records(buf, broker_group)


def _decode_records(buf, broker_group: str) -> list[MessageExt]:
    out: list[MessageExt] = []
    append = out.append
    unpack = rec.HEADER.unpack_from
    HS, RM, props_of, host_of = rec.HEADER_SIZE, rec.RECORD_MAGIC, rec.decode_properties, \
        rec.format_host
    RM2 = rec.RECORD_MAGIC_V2          # a log written before format 3
    SEQUENCED = rec.FLAG_SEQUENCED
    mv = memoryview(buf)
    pos, end = 0, len(buf)
    topics: dict[bytes, str] = {}
    hosts: dict[bytes, str] = {}           # a pull's messages come from few producers
    while pos < end:
        if end - pos < HS:
            raise rec.RecordError(f"a cut record in pulled data at {pos}")
        (size, magic, _crc, qid, qoff, phys, born, stored, host, flags,
         lt, lg, lk, lp, lb) = unpack(buf, pos)
        if magic != RM and magic != RM2:
            raise rec.RecordError(f"bad magic in pulled data at {pos}")
        # (a size of 0 read on would never end; one past the answer would cut the body)
        if size != HS + lt + lg + lk + lp + lb or size > end - pos:
            raise rec.RecordError(f"a record whose lengths disagree in pulled data at {pos}")
        p = pos + HS
        traw = bytes(mv[p:p + lt])
        topic = topics.get(traw)
        if topic is None:
            topic = topics[traw] = traw.decode(errors="replace")
        p += lt
        # tolerant decoding: a bad byte must never wedge a consumer on one record
        tags = str(mv[p:p + lg], "utf-8", "replace") if lg else ""
        p += lg
        keys = str(mv[p:p + lk], "utf-8", "replace") if lk else ""
        p += lk
        props = props_of(bytes(mv[p:p + lp])) if lp else {}
        if flags & SEQUENCED:                  # an idempotent batch's: not the application's
            flags &= ~SEQUENCED
            for k in SEQUENCING:
                props.pop(k, None)
        p += lp
        born_host = hosts.get(host)
        if born_host is None:
            born_host = hosts[host] = host_of(host)
        append(MessageExt(topic, bytes(mv[p:p + lb]), tags, keys, props, qid, qoff, phys,
                          born, stored, born_host, flags, broker_group))
        pos += size
    return out


_decode: Any = native.declined     # bound by _bind: the C decode, or declining all


@native.chosen
def _bind(loops: Any) -> None:
    global _decode
    _decode = loops.decode if loops is not None else native.declined
