"""A received message's receipt handle, as the proxy gives it to a client:
what duomq's share ack needs (broker group, queue, offset, delivery count
and the pop's key), self-contained, so that any proxy honours a handle
another gave. Pure: no I/O."""

from __future__ import annotations

import base64
from dataclasses import dataclass

from duomq.common.names import validate_name

PREFIX = "dq1."


class BadReceipt(ValueError):
    pass


@dataclass(frozen=True)
class Receipt:
    broker_group: str
    queue_id: int
    queue_offset: int
    delivery_count: int
    key: int

    def handle(self) -> str:
        raw = f"{self.broker_group}|{self.queue_id}|{self.queue_offset}|{self.delivery_count}|" \
              f"{self.key}".encode()
        return PREFIX + base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @property
    def share_receipt(self) -> tuple[int, int, int, int]:
        return self.queue_id, self.queue_offset, self.delivery_count, self.key


def parse(handle: str) -> Receipt:
    """A handle ``Receipt.handle`` made (BadReceipt: not one)."""
    if not handle.startswith(PREFIX) or len(handle) > 512:
        raise BadReceipt(f"not a receipt handle of duomq proxy: {handle[:40]!r}")
    body = handle[len(PREFIX):]
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()
        group, qid, offset, count, key = raw.split("|")
        validate_name("broker group", group)
        out = Receipt(group, int(qid), int(offset), int(count), int(key))
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadReceipt(f"a garbled receipt handle ({exc})") from None
    if min(out.queue_id, out.queue_offset, out.delivery_count, out.key) < 0:
        raise BadReceipt("a receipt handle with a negative field")
    return out
