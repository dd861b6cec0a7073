"""A timer message's recall handle (pure): what a send of one returns
(``SendResult.recall_handle``) and a recall names, as RocketMQ 5.3's
``RecallMessage`` does: the topic, the message id its producer was given
(broker group, epoch, commit-log offset) and the delivery time, in one
URL-safe word. Nothing in it is trusted: the broker checks each part against
the record stored at that offset (a handle forged for another topic, or for
another message, recalls nothing)."""

from __future__ import annotations

import base64
import binascii
import struct

from duomq.common.errors import BadRequestError
from duomq.format.record import parse_msg_id

VERSION = 1
_HEAD = struct.Struct(">Bq")           # version, deliver_at


def make(topic: str, msg_id: str, deliver_at_ms: int) -> str:
    raw = _HEAD.pack(VERSION, deliver_at_ms) + msg_id.encode() + b"\0" + topic.encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def parse(handle: str) -> tuple[str, str, int]:
    """``(topic, msg_id, deliver_at_ms)`` of a handle, or BadRequestError."""
    bad = BadRequestError(f"{handle[:60]!r} is not a recall handle (a send of a timer message "
                          f"gives one: SendResult.recall_handle)")
    if not isinstance(handle, str) or not 8 <= len(handle) <= 512:
        raise bad
    try:
        raw = base64.urlsafe_b64decode(handle + "=" * (-len(handle) % 4))
        version, at = _HEAD.unpack_from(raw)
        msg_id, topic = raw[_HEAD.size:].decode().split("\0")
        parse_msg_id(msg_id)
    except (binascii.Error, struct.error, ValueError, UnicodeDecodeError):
        raise bad from None
    if version != VERSION or at <= 0 or not topic:
        raise bad
    return topic, msg_id, at
