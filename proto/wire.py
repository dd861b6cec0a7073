"""The optional C codec of ``proto/_wire.c`` (None without it), and the
SEND handler's answer object.

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
                 "degraded", "epoch", "duplicate")

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
                               epoch=self.epoch, duplicate=self.duplicate)

    def SerializeToString(self) -> bytes:    # noqa: N802 (protobuf's name: codec calls it)
        wire = WIRE
        if wire is None:
            return self.message().SerializeToString()
        return wire.send_response(self.queue_offset, self.physical_offsets, self.broker_group,
                                  self.in_sync_replicas, self.degraded, self.epoch,
                                  self.duplicate)
