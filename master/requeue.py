"""Records the broker writes again (pure): a delayed message into the
schedule topic, a due one into its topic or its next level, a timer message
into the timer topic and, come due, into its topic (or a recall of it into
the timer topic), a failed one into
``%RETRY%<group>`` or ``%DLQ%<group>``, a transaction's half message into
the half topic and, committed, into its topic. Each returns ``(topic, queue_id,
record)`` with the record in the producer's layout (the store patches the
broker fields), body, tags, keys and born time kept."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from duomq.common import delay as d
from duomq.common import transaction as tx
from duomq.common.errors import BadRequestError
from duomq.common.message import MessageExt
from duomq.common.names import DLQ_PREFIX, HALF_TOPIC, RETRY_PREFIX, TIMER_TOPIC, validate_queue
from duomq.format import native
from duomq.format import record as rec

Requeued = tuple[str, int, bytes]
MAX_DELAY_MS = 7 * 86_400_000          # timer_max_delay_ms's default


def _record(msg: MessageExt, topic: str, props: dict[str, str]) -> bytes:
    host, _, port = msg.born_host.rpartition(":")
    return rec.encode_record(topic.encode(), msg.tags.encode(), msg.keys.encode(),
                             rec.encode_properties(props), msg.body, msg.born_timestamp_ms,
                             rec.pack_host(host, int(port)) if host else rec.NO_HOST, msg.flags)


def _scheduled(msg: MessageExt, props: dict[str, str], real_topic: str, real_qid: int,
               level: int) -> Requeued:
    props = {**props, d.REAL_TOPIC: real_topic, d.REAL_QID: str(real_qid), d.DELAY: str(level)}
    return d.SCHEDULE_TOPIC, level - 1, _record(msg, d.SCHEDULE_TOPIC, props)


def asked_level(props: dict[str, str], levels: tuple[int, ...]) -> int:
    """The delay level a producer's message asks for (0: none)."""
    try:
        return min(max(int(props[d.DELAY]), 0), len(levels)) if d.DELAY in props else 0
    except ValueError:
        raise BadRequestError(f"{d.DELAY} must be a delay level (an integer), got "
                              f"{props[d.DELAY]!r}") from None


def broker_only(props: dict[str, str]) -> None:
    """A producer's message naming what only the broker writes (a recall, a
    timer's rolled copy) is refused: stored in the timer topic it would
    cancel another's timer."""
    for name in d.BROKER_ONLY:
        if name in props:
            raise BadRequestError(f"property {name} is the broker's own (it marks a recall "
                                  f"or a timer's copy): a message may not carry it; not stored")


def deliver_at(props: dict[str, str], now_ms: int, max_delay_ms: int) -> int:
    """The delivery time a timer message asks for (epoch ms), checked: at
    most ``max_delay_ms`` ahead; 0: it asks for none."""
    text = props.get(d.DELIVER_AT)
    if text is None:
        return 0
    try:
        at = int(text)
    except ValueError:
        at = -1
    if at < 0:
        raise BadRequestError(f"{d.DELIVER_AT} must be a delivery time in epoch milliseconds, "
                              f"got {text[:40]!r}")
    if at - now_ms > max_delay_ms:
        raise BadRequestError(
            f"a delivery time {(at - now_ms) / 86_400_000:.1f} days ahead is past this broker's "
            f"timer_max_delay_ms ({max_delay_ms / 86_400_000:g} days): not stored")
    return at


def schedule(msg: MessageExt, queue_id: int, levels: tuple[int, ...], now_ms: int,
             user: str | None = None, max_delay_ms: int = MAX_DELAY_MS) -> Requeued:
    """A producer's message to ``msg.topic``/``queue_id``: a transaction's
    half message to the half topic (``user``: who sent it); a timer message
    (a delivery time ahead) in the timer topic; held in the schedule topic
    when it asks for a delay level; else as it is (a delivery time past:
    delivered at once)."""
    broker_only(msg.properties)
    at = deliver_at(msg.properties, now_ms, max_delay_ms)   # a half's, checked as it is sent
    if msg.properties.get(tx.TRANSACTION) == "true":
        return half(msg, queue_id, user)
    if at > now_ms:
        props = {k: v for k, v in msg.properties.items() if k != d.DELAY}
        props.update({d.REAL_TOPIC: msg.topic, d.REAL_QID: str(queue_id)})
        return TIMER_TOPIC, 0, _record(msg, TIMER_TOPIC, props)
    level = 0 if at else asked_level(msg.properties, levels)
    if level == 0:
        props = {k: v for k, v in msg.properties.items() if k not in d.SCHEDULING}
        return msg.topic, queue_id, _record(msg, msg.topic, props)
    return _scheduled(msg, msg.properties, msg.topic, queue_id, level)


class _Out:
    """A record to encode in the C loop (what it reads of a message)."""
    __slots__ = ("topic", "body", "tags", "keys", "properties")

    def __init__(self, body, tags: str, keys: str, properties: dict[str, str]):
        self.topic, self.body, self.tags, self.keys = TIMER_TOPIC, body, tags, keys
        self.properties = properties


def timers_batch(msgs: list[MessageExt], queue_id: int, now_ms: int, max_delay_ms: int,
                 max_record_bytes: int) -> tuple[bytes, list[int]] | None:
    """A producer's batch of timer messages only (every one due ahead, none
    asking for a level or a half, all born at one time on one host, no
    flags: what a client's batch of timers is) for the timer topic, in one
    C loop: the bytes ``schedule`` gives record by record, and each one's
    delivery time. None: not such a batch, or the C loop declines it (then
    ``schedule`` says what is wrong)."""
    if _encode is native.declined or not msgs:
        return None
    first = msgs[0]
    born, host = first.born_timestamp_ms, first.born_host
    out, ats = [], []
    real = str(queue_id)
    for m in msgs:
        p = m.properties
        if d.RECALL_OF in p or d.TIMER_ORIGIN in p:
            broker_only(p)
        at = deliver_at(p, now_ms, max_delay_ms)
        if at <= now_ms or m.born_timestamp_ms != born or m.born_host != host or m.flags or \
                d.DELAY in p or tx.TRANSACTION in p:
            return None
        props = dict(p)
        props[d.REAL_TOPIC] = m.topic
        props[d.REAL_QID] = real
        out.append(_Out(m.body, m.tags, m.keys, props))
        ats.append(at)
    data = _encode(out, TIMER_TOPIC, born, _packed_host(host), max_record_bytes,
                   _NOTHING_ROUTED, 0)
    return None if data is None else (data, ats)


@functools.lru_cache(maxsize=1024)
def _packed_host(host: str) -> bytes:
    h, _, port = host.rpartition(":")
    return rec.pack_host(h, int(port)) if h else rec.NO_HOST


def timers_records(buf: bytes | bytearray, count: int, topic: str, queue_id: int, now_ms: int,
                   max_delay_ms: int, max_record_bytes: int
                   ) -> tuple[bytes, list[int], list[int]] | None:
    """``timers_batch`` of a producer's batch still encoded, checked and
    rewritten in one C loop (nothing decoded): the records, each one's
    delivery time and size. None: the C loop does not take it (every doubt
    goes to the decoding path, which says what is wrong)."""
    return _timers(buf, count, topic.encode(), str(queue_id).encode(), now_ms, max_delay_ms,
                   max_record_bytes, _TIMER_TOPIC)


_NOTHING_ROUTED: frozenset[str] = frozenset()
_TIMER_TOPIC = TIMER_TOPIC.encode()
_encode: Any = native.declined     # bound by _bind: the C loops' encode, or declining all
_timers: Any = native.declined     # and their timers


@native.chosen
def _bind(loops: Any) -> None:
    global _encode, _timers
    _encode = loops.encode if loops is not None else native.declined
    _timers = loops.timers if loops is not None else native.declined


def fired(msg: MessageExt) -> Requeued:
    """A timer message that came due: to its topic and queue, with the id
    its producer was given (``ORIGIN_MESSAGE_ID``: fired again by the next
    master after a failover, its consumer recognises the duplicate)."""
    props = dict(msg.properties)
    props.setdefault(d.ORIGIN_MESSAGE_ID, msg.msg_id)
    real_topic, real_qid = _real_queue(msg, "timer message")
    clean = {k: v for k, v in props.items() if k not in d.SCHEDULING and k != d.TIMER_ORIGIN}
    return real_topic, real_qid, _record(msg, real_topic, clean)


def rolled(msg: MessageExt, origin: int) -> Requeued:
    """A timer not due yet whose copy is getting old (``timer.indexer.roll_ms``):
    a new copy in the timer topic, naming its first copy (``origin``, what a
    recall names) and the id its producer was given; the old copy is left to
    retention."""
    props = dict(msg.properties)
    props[d.TIMER_ORIGIN] = str(origin)
    props.setdefault(d.ORIGIN_MESSAGE_ID, msg.msg_id)
    return TIMER_TOPIC, 0, _record(msg, TIMER_TOPIC, props)


def recall(topic: str, origin: int, at: int, now_ms: int) -> Requeued:
    """The record that recalls the timer message stored at ``origin`` for
    ``topic`` at ``at``: in the timer topic, indexed in the timer's slot."""
    props = {d.RECALL_OF: str(origin), d.DELIVER_AT: str(at), d.REAL_TOPIC: topic}
    return TIMER_TOPIC, 0, rec.encode_record(TIMER_TOPIC.encode(), b"", b"",
                                             rec.encode_properties(props), b"", now_ms,
                                             rec.NO_HOST, 0)


def _real_queue(msg: MessageExt, what: str) -> tuple[str, int]:
    """The topic and queue a message held elsewhere goes to (its REAL_TOPIC
    and REAL_QID), checked."""
    props = msg.properties
    try:
        real_topic, real_qid = props[d.REAL_TOPIC], int(props[d.REAL_QID])
        validate_queue(real_topic, real_qid)
    except (KeyError, ValueError):
        raise BadRequestError(f"{what} {msg.msg_id} names no valid real topic and queue "
                              f"({props.get(d.REAL_TOPIC)!r}, {props.get(d.REAL_QID)!r})") from None
    return real_topic, real_qid


def due(msg: MessageExt, levels: tuple[int, ...], now_ms: int) -> Requeued:
    """A scheduled message that came due: to its next level if it has a
    delivery time still ahead, else to its topic. It carries the id of its
    first stored copy (``ORIGIN_MESSAGE_ID``, the id its producer was given):
    a timer moved again by the next master after a failover (the schedule's
    progress reaches a slave after the message it moved) is a duplicate its
    consumer recognises by it."""
    props = dict(msg.properties)
    props.setdefault(d.ORIGIN_MESSAGE_ID, msg.msg_id)
    real_topic, real_qid = _real_queue(msg, "scheduled message")
    if d.DELIVER_AT in props:
        try:
            level = d.hop_level(levels, int(props[d.DELIVER_AT]) - now_ms)
        except ValueError:
            level = 0
        if level:
            return _scheduled(msg, props, real_topic, real_qid, level)
    clean = {k: v for k, v in props.items() if k not in d.SCHEDULING}
    return real_topic, real_qid, _record(msg, real_topic, clean)


def send_back(msg: MessageExt, group: str, levels: tuple[int, ...], max_reconsume_times: int,
              delay_level: int = 0, dead_letter: bool = False) -> Requeued:
    """A message ``group`` failed to consume: to its retry topic with a delay
    of level ``3 + retries`` (or ``delay_level``), or to its dead-letter topic
    once it was retried ``max_reconsume_times`` times."""
    props = {k: v for k, v in msg.properties.items() if k not in d.SCHEDULING}
    times = int(props.get(d.RECONSUME_TIME, "0") or 0)
    props.setdefault(d.RETRY_TOPIC, msg.topic)
    props.setdefault(d.ORIGIN_MESSAGE_ID, msg.msg_id)
    if dead_letter or times >= max_reconsume_times:
        topic = DLQ_PREFIX + group
        return topic, 0, _record(msg, topic, props)
    props[d.RECONSUME_TIME] = str(times + 1)
    level = min(delay_level, len(levels)) if delay_level > 0 else d.retry_level(levels, times)
    return _scheduled(msg, props, RETRY_PREFIX + group, 0, level)


def half(msg: MessageExt, queue_id: int, user: str | None = None) -> Requeued:
    """A transaction's half message: in the half topic, its real topic and
    queue (and any delay, applied at commit) in its properties, and the user
    that sent it (the broker's word: a client's own is dropped)."""
    if not msg.properties.get(tx.PRODUCER_GROUP):
        raise BadRequestError(f"a transactional message needs its producer group "
                              f"({tx.PRODUCER_GROUP}): the broker checks it back there")
    props = {k: v for k, v in msg.properties.items() if k != tx.USER}
    props.update({d.REAL_TOPIC: msg.topic, d.REAL_QID: str(queue_id)})
    if user:
        props[tx.USER] = user
    return HALF_TOPIC, 0, _record(msg, HALF_TOPIC, props)


def committed(msg: MessageExt, levels: tuple[int, ...], now_ms: int) -> Requeued:
    """A committed half message, as it was sent: to its topic and queue (or
    the schedule or timer topic, when it asked for a delay), with the
    transaction's id and without the half's own properties. (Its delivery
    time was checked when the half was sent: none is refused now.)"""
    props = msg.properties
    real_topic, real_qid = _real_queue(msg, "half message")
    clean = {k: v for k, v in props.items()
             if k not in (tx.TRANSACTION, tx.CHECK_TIMES, tx.USER, d.REAL_TOPIC, d.REAL_QID)}
    clean[tx.HALF_ID] = msg.msg_id
    return schedule(dataclasses.replace(msg, topic=real_topic, properties=clean), real_qid,
                    levels, now_ms, max_delay_ms=1 << 62)
