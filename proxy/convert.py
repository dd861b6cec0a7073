"""RocketMQ 5 protocol messages to duomq's and back, and duomq's outcomes as
the protocol's status codes. Pure: no I/O.

A message keeps what the client gave it: its id (``message_id``, made by
the client) as the property ``UNIQ_KEY`` (RocketMQ's name for it), its
message group (FIFO) as ``__SHARDINGKEY``, its tag, keys and user
properties as duomq's; a delivery time becomes a timer message."""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from duomq.common import delay as dl
from duomq.common import errors
from duomq.common import transaction as tx
from duomq.common.message import Message
from duomq.proxy.protocol import d

UNIQ_KEY = "UNIQ_KEY"              # the client's message id (RocketMQ's property)
MESSAGE_GROUP = "__SHARDINGKEY"     # a FIFO message's group (RocketMQ 5's property)
RESERVED = frozenset({UNIQ_KEY, MESSAGE_GROUP})
# duomq's own properties: not a user's (a received message's user_properties leave them out)
SYSTEM = RESERVED | dl.SCHEDULING | dl.BROKER_ONLY | frozenset({
    dl.RETRY_TOPIC, dl.RECONSUME_TIME, dl.ORIGIN_MESSAGE_ID, tx.TRANSACTION, tx.PRODUCER_GROUP,
    tx.CHECK_TIMES, tx.USER, tx.HALF_ID})
_MS_NOT_S = 10 ** 11                # a "seconds" past this is ms (year 5138 in s; 1973 in ms)


class ConvertError(ValueError):
    """A message the protocol allows and duomq cannot take: (code, why)."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Outgoing:
    """One protocol message, as duomq sends it."""
    message: Message
    message_id: str               # the client's id ("" when it gave none)
    group: str                    # its FIFO message group ("": none)
    kind: int                     # the protocol's MessageType the client stated


def delivery_ms(ts) -> int:
    """A ``delivery_timestamp`` in epoch ms. rocketmq-python-client 5.1.2
    puts milliseconds in its ``seconds`` field: a value that can only be
    milliseconds (past year 5000 as seconds) is read as milliseconds."""
    if ts.seconds >= _MS_NOT_S:
        return ts.seconds
    return ts.seconds * 1000 + ts.nanos // 1_000_000


def outgoing(m) -> Outgoing:
    """A protocol ``Message`` as duomq's (ConvertError: not one duomq takes)."""
    sp = m.system_properties
    if not m.topic.name:
        raise ConvertError(d.ILLEGAL_TOPIC, "a message without a topic")
    if not m.body:
        raise ConvertError(d.MESSAGE_BODY_EMPTY, "a message with an empty body")
    if sp.body_encoding == d.GZIP:
        raise ConvertError(d.NOT_IMPLEMENTED, "GZIP message bodies are not supported: send "
                                              "IDENTITY")
    props = dict(m.user_properties)
    clash = SYSTEM.intersection(props)         # (a user's DELAY or TRAN_MSG would route it)
    if clash:
        raise ConvertError(d.ILLEGAL_MESSAGE_PROPERTY_KEY,
                           f"user property {sorted(clash)[0]!r} is reserved")
    if sp.message_id:
        props[UNIQ_KEY] = sp.message_id
    if sp.message_group:
        props[MESSAGE_GROUP] = sp.message_group
    at = delivery_ms(sp.delivery_timestamp) if sp.HasField("delivery_timestamp") else 0
    if sp.message_type == d.TRANSACTION and sp.message_group:
        raise ConvertError(d.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                           "a message group on a transactional message")
    if at and sp.message_type in (d.FIFO, d.TRANSACTION):
        raise ConvertError(d.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                           "a delivery time on a FIFO or transactional message")
    msg = Message(m.topic.name, m.body, tags=sp.tag, keys=list(sp.keys), properties=props,
                  deliver_at_ms=at)
    return Outgoing(msg, sp.message_id, sp.message_group, sp.message_type)


def set_timestamp(ts, ms: int) -> None:
    ts.seconds, ts.nanos = ms // 1000, ms % 1000 * 1_000_000


def incoming(m, receipt_handle: str) -> d.Message:
    """A message duomq delivered (a ``ReceivedMessage``) as the protocol's,
    with ``receipt_handle``."""
    props = m.properties
    out = d.Message(body=m.body)
    out.topic.name = m.topic
    out.user_properties.update({k: v for k, v in props.items() if k not in SYSTEM})
    sp = out.system_properties
    sp.message_id = props.get(UNIQ_KEY) or m.msg_id
    if m.tags:
        sp.tag = m.tags
    sp.keys.extend(m.key_list)
    sp.body_digest.type, sp.body_digest.checksum = d.CRC32, f"{zlib.crc32(m.body):08X}"
    sp.body_encoding = d.IDENTITY
    group = props.get(MESSAGE_GROUP, "")
    at = props.get(dl.DELIVER_AT, "")
    sp.message_type = d.FIFO if group else d.DELAY if at else d.NORMAL
    if group:
        sp.message_group = group
    if at.isdigit():
        set_timestamp(sp.delivery_timestamp, int(at))
    set_timestamp(sp.born_timestamp, m.born_timestamp_ms)
    set_timestamp(sp.store_timestamp, m.store_timestamp_ms)
    sp.born_host, sp.store_host = m.born_host, m.broker_group
    sp.queue_id, sp.queue_offset = m.queue_id, m.queue_offset
    sp.delivery_attempt = getattr(m, "delivery_count", 1)
    sp.receipt_handle = receipt_handle
    return out


# duomq's send statuses (client/producer SendStatus values) -> the protocol's codes
SEND_CODES = {"SEND_OK": d.OK, "FLUSH_DISK_TIMEOUT": d.MASTER_PERSISTENCE_TIMEOUT,
              "FLUSH_SLAVE_TIMEOUT": d.SLAVE_PERSISTENCE_TIMEOUT,
              "SLAVE_NOT_AVAILABLE": d.HA_NOT_AVAILABLE}

# duomq's errors -> the protocol's codes, the most specific first
_ERROR_CODES: list[tuple[type[BaseException], int]] = [
    (errors.TopicNotExistError, d.TOPIC_NOT_FOUND),
    (errors.MessageTooLargeError, d.MESSAGE_BODY_TOO_LARGE),
    (errors.InvalidNameError, d.ILLEGAL_TOPIC),
    (errors.AuthenticationError, d.UNAUTHORIZED),
    (errors.AuthorizationError, d.FORBIDDEN),
    (errors.QuotaExceededError, d.TOO_MANY_REQUESTS),
    (errors.ReceiptExpiredError, d.INVALID_RECEIPT_HANDLE),
    (errors.TransactionNotFoundError, d.INVALID_TRANSACTION_ID),
    (errors.RequestTimeoutError, d.PROXY_TIMEOUT),
    (errors.NoRouteError, d.TOPIC_NOT_FOUND),
    (errors.ServiceNotAvailableError, d.INTERNAL_SERVER_ERROR),
    (errors.BadRequestError, d.BAD_REQUEST),
]


def error_code(exc: BaseException) -> int:
    """The protocol's code for an error duomq raised."""
    if isinstance(exc, errors.BadRequestError) and "timer_max_delay_ms" in str(exc):
        return d.ILLEGAL_DELIVERY_TIME
    if isinstance(exc, ConvertError):
        return exc.code
    for kind, code in _ERROR_CODES:
        if isinstance(exc, kind):
            return code
    return d.INTERNAL_SERVER_ERROR


def status(code: int, message: str = "OK") -> d.Status:
    return d.Status(code=code, message=message)
