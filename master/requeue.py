"""Records the broker writes again (pure): a delayed message into the
schedule topic, a due one into its topic or its next level, a failed one into
``%RETRY%<group>`` or ``%DLQ%<group>``, a transaction's half message into
the half topic and, committed, into its topic. Each returns ``(topic, queue_id,
record)`` with the record in the producer's layout (the store patches the
broker fields), body, tags, keys and born time kept."""

from __future__ import annotations

import dataclasses

from duomq.common import delay as d
from duomq.common import transaction as tx
from duomq.common.errors import BadRequestError
from duomq.common.message import MessageExt
from duomq.common.names import DLQ_PREFIX, HALF_TOPIC, RETRY_PREFIX, validate_queue
from duomq.format import record as rec

Requeued = tuple[str, int, bytes]


def _record(msg: MessageExt, topic: str, props: dict[str, str]) -> bytes:
    host, _, port = msg.born_host.rpartition(":")
    return rec.encode_record(topic.encode(), msg.tags.encode(), msg.keys.encode(),
                             rec.encode_properties(props), msg.body, msg.born_timestamp_ms,
                             rec.pack_host(host, int(port)) if host else rec.NO_HOST, msg.flags)


def _scheduled(msg: MessageExt, props: dict[str, str], real_topic: str, real_qid: int,
               level: int) -> Requeued:
    props = {**props, d.REAL_TOPIC: real_topic, d.REAL_QID: str(real_qid), d.DELAY: str(level)}
    return d.SCHEDULE_TOPIC, level - 1, _record(msg, d.SCHEDULE_TOPIC, props)


def asked_level(props: dict[str, str], levels: tuple[int, ...], now_ms: int) -> int:
    """The level a producer's message goes to first (0: not delayed, or due)."""
    try:
        if d.DELIVER_AT in props:
            return d.hop_level(levels, int(props[d.DELIVER_AT]) - now_ms)
        if d.DELAY in props:
            return min(max(int(props[d.DELAY]), 0), len(levels))
    except ValueError:
        raise BadRequestError(f"{d.DELIVER_AT} and {d.DELAY} must be integers, got "
                              f"{props.get(d.DELIVER_AT, props.get(d.DELAY))!r}") from None
    return 0


def schedule(msg: MessageExt, queue_id: int, levels: tuple[int, ...], now_ms: int,
             user: str | None = None) -> Requeued:
    """A producer's message to ``msg.topic``/``queue_id``: a transaction's
    half message to the half topic (``user``: who sent it); held in the
    schedule topic when it asks for a delay; else as it is."""
    if msg.properties.get(tx.TRANSACTION) == "true":
        return half(msg, queue_id, user)
    level = asked_level(msg.properties, levels, now_ms)
    if level == 0:
        props = {k: v for k, v in msg.properties.items() if k not in d.SCHEDULING}
        return msg.topic, queue_id, _record(msg, msg.topic, props)
    return _scheduled(msg, msg.properties, msg.topic, queue_id, level)


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
    the schedule topic, when it asked for a delay), with the transaction's
    id and without the half's own properties."""
    props = msg.properties
    real_topic, real_qid = _real_queue(msg, "half message")
    clean = {k: v for k, v in props.items()
             if k not in (tx.TRANSACTION, tx.CHECK_TIMES, tx.USER, d.REAL_TOPIC, d.REAL_QID)}
    clean[tx.HALF_ID] = msg.msg_id
    return schedule(dataclasses.replace(msg, topic=real_topic, properties=clean), real_qid,
                    levels, now_ms)
