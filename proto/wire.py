"""The optional C codec of ``proto/_wire.c`` (None without it), and the
SEND request and the SEND and PULL answers as plain objects.

``WIRE`` is the compiled module when the package was built with a C
compiler and ``DUOMQ_NATIVE`` is not ``0`` (as ``format/native.py``'s
loops). ``codec`` reads it at each call, so a test can switch it off; the
protobuf path is the reference and the fallback, and the tests compare
the two byte for byte."""

from __future__ import annotations

import os
from types import ModuleType

from duomq.proto import pb


def _load() -> ModuleType | None:
    if os.environ.get("DUOMQ_NATIVE", "1") == "0":
        return None
    try:
        from duomq.proto import _wire
    except ImportError:
        return None
    return _wire


WIRE = _load()


class SendAnswer:
    """A SendResponse as the SEND handler builds it: plain attributes (a
    protobuf object cost the serving thread ~2 us per send to build), and
    ``SerializeToString`` giving SendResponse's bytes (C, or protobuf)."""

    __slots__ = ("queue_offset", "physical_offsets", "broker_group", "in_sync_replicas",
                 "degraded", "epoch", "duplicate", "stored_epoch")

    def __init__(self, broker_group: str, queue_offset: int = 0,
                 physical_offsets: list[int] | None = None, epoch: int = 0,
                 duplicate: bool = False):
        self.queue_offset = queue_offset
        self.physical_offsets = physical_offsets if physical_offsets is not None else []
        self.broker_group = broker_group
        self.in_sync_replicas = 0
        self.degraded = False
        self.epoch = epoch
        self.duplicate = duplicate
        self.stored_epoch = 0        # a duplicate's first store's, when another epoch's

    @classmethod
    def of(cls, fields: tuple) -> SendAnswer:
        """A SendResponse's fields as ``_wire.read_send_answer`` reads them."""
        answer = cls(fields[2], fields[0], fields[1], fields[5], fields[6])
        answer.in_sync_replicas, answer.degraded = fields[3], fields[4]
        return answer

    def message(self) -> pb.SendResponse:
        return pb.SendResponse(queue_offset=self.queue_offset,
                               physical_offsets=self.physical_offsets,
                               broker_group=self.broker_group,
                               in_sync_replicas=self.in_sync_replicas, degraded=self.degraded,
                               epoch=self.epoch, duplicate=self.duplicate,
                               stored_epoch=self.stored_epoch)

    def SerializeToString(self) -> bytes:    # noqa: N802 (protobuf's name: codec calls it)
        wire = WIRE
        if wire is None or self.stored_epoch:       # the C writer's fields are the first 7
            return self.message().SerializeToString()
        return wire.send_response(self.queue_offset, self.physical_offsets, self.broker_group,
                                  self.in_sync_replicas, self.degraded, self.epoch,
                                  self.duplicate)


class PullAnswer:
    """A PullResponse as the PULL handler builds it and a client reads it in
    C: plain attributes, the two optional fields None while unset
    (``HasField`` says so, as protobuf's), and ``SerializeToString`` giving
    PullResponse's bytes (C, or protobuf)."""

    __slots__ = ("count", "records", "next_offset", "min_offset", "max_offset",
                 "suggest_broker_id", "advice_ttl_ms", "replica_lag_ms")

    def __init__(self, count: int = 0, records: bytes | bytearray | memoryview = b"",
                 next_offset: int = 0, min_offset: int = 0, max_offset: int = 0):
        self.count = count
        self.records = records
        self.next_offset = next_offset
        self.min_offset = min_offset
        self.max_offset = max_offset
        self.suggest_broker_id: int | None = None
        self.advice_ttl_ms = 0
        self.replica_lag_ms: int | None = None

    @classmethod
    def of(cls, fields: tuple) -> PullAnswer:
        """A PullResponse's fields as ``_wire.read_pull_answer`` reads them."""
        answer = cls(*fields[:5])
        answer.suggest_broker_id, answer.advice_ttl_ms, answer.replica_lag_ms = fields[5:]
        return answer

    def HasField(self, name: str) -> bool:    # noqa: N802 (protobuf's name: callers use it)
        if name not in ("suggest_broker_id", "replica_lag_ms"):
            raise ValueError(f"PullResponse has no optional field {name!r}")
        return getattr(self, name) is not None

    def message(self) -> pb.PullResponse:
        msg = pb.PullResponse(count=self.count, records=bytes(self.records),
                              next_offset=self.next_offset, min_offset=self.min_offset,
                              max_offset=self.max_offset, advice_ttl_ms=self.advice_ttl_ms)
        if self.suggest_broker_id is not None:
            msg.suggest_broker_id = self.suggest_broker_id
        if self.replica_lag_ms is not None:
            msg.replica_lag_ms = self.replica_lag_ms
        return msg

    def SerializeToString(self) -> bytes:    # noqa: N802 (protobuf's name: codec calls it)
        wire = WIRE
        if wire is None:
            return self.message().SerializeToString()
        return wire.pull_response(self.count, self.records, self.next_offset, self.min_offset,
                                  self.max_offset, self.suggest_broker_id, self.advice_ttl_ms,
                                  self.replica_lag_ms)


class SendAsk:
    """A SendRequest as a producer builds it: plain attributes (a protobuf
    object cost a send ~4 us to build and serialize), and
    ``SerializeToString`` giving SendRequest's bytes (C, or protobuf)."""

    __slots__ = ("topic", "queue_id", "count", "records", "producer_group", "scheduled")

    def __init__(self, topic: str, queue_id: int, count: int, records: bytes,
                 producer_group: str = "", scheduled: bool = False):
        self.topic = topic
        self.queue_id = queue_id
        self.count = count
        self.records = records
        self.producer_group = producer_group
        self.scheduled = scheduled

    def message(self) -> pb.SendRequest:
        return pb.SendRequest(topic=self.topic, queue_id=self.queue_id, count=self.count,
                              records=self.records, producer_group=self.producer_group,
                              scheduled=self.scheduled)

    def SerializeToString(self) -> bytes:    # noqa: N802 (protobuf's name: codec calls it)
        wire = WIRE
        if wire is None:
            return self.message().SerializeToString()
        return wire.send_request(self.topic, self.queue_id, self.count, self.records,
                                 self.producer_group, self.scheduled)
