"""Rules for the names of topics, consumer and producer groups, broker groups
and clusters: ``[A-Za-z0-9_-]{1,127}``. The prefixes ``%RETRY%`` and ``%DLQ%``
are reserved for the system's own retry and dead-letter topics, and the
broker's internal topics (``SCHEDULE_TOPIC_XXXX``, the transactions'
``RMQ_SYS_TRANS_HALF_TOPIC`` and ``RMQ_SYS_TRANS_OP_HALF_TOPIC``, the share
log, the timers' ``DUOMQ_SYS_TIMER``) are not a client's.

A topic name and a queue id become a directory of the store: the store checks
them with ``validate_queue`` whatever path a record came through."""

from __future__ import annotations

import functools
import re

from duomq.common.errors import InvalidNameError

NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,127}")
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
SYSTEM_PREFIXES = (RETRY_PREFIX, DLQ_PREFIX)
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"       # RocketMQ's name for delayed messages
HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"      # RocketMQ's: transactions' half messages
OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"     # ... and how each one ended
SHARE_LOG_TOPIC = "DUOMQ_SYS_SHARE_LOG"     # share groups' pops and acks (share/handlers.py)
TIMER_TOPIC = "DUOMQ_SYS_TIMER"             # timer messages until due, and their recalls
INTERNAL_TOPICS = frozenset({SCHEDULE_TOPIC, HALF_TOPIC, OP_TOPIC,    # the broker's own:
                             SHARE_LOG_TOPIC, TIMER_TOPIC})           # clients never name them
MAX_QUEUES = 1024                            # queues of one topic on one broker group


def reserved(topic: str) -> bool:
    """A topic the system keeps: the broker's own, or a group's retry or
    dead-letter topic (no policy grants them; listings show them on ask)."""
    return topic in INTERNAL_TOPICS or topic.startswith(SYSTEM_PREFIXES)


def validate_name(kind: str, name: str, *, allow_system: bool = False,
                  internal: bool = False) -> str:
    """Return ``name`` if it is a valid ``kind`` name, else raise InvalidNameError.

    ``allow_system`` admits ``%RETRY%<group>`` and ``%DLQ%<group>`` (the broker
    and the consumer use them; users cannot create them); ``internal`` admits
    the broker's internal topics (only the broker's own writes). Names found
    valid are remembered (a send checks its topic's name on both sides: the
    pattern match was a few us of every one); a refused name is checked anew.
    """
    if type(name) is str:
        return _valid(kind, name, allow_system, internal)
    return _check(kind, name, allow_system, internal)


@functools.lru_cache(maxsize=16384)
def _valid(kind: str, name: str, allow_system: bool, internal: bool) -> str:
    return _check(kind, name, allow_system, internal)   # (lru_cache keeps no exception)


def _check(kind: str, name: str, allow_system: bool, internal: bool) -> str:
    if not isinstance(name, str):
        raise InvalidNameError(f"{kind} name must be a string, got {type(name).__name__}")
    if len(name) > 127 + len(RETRY_PREFIX):        # never echo a huge one back
        raise InvalidNameError(f"{kind} name {name[:40]!r}... is {len(name)} characters: use "
                               f"1 to 127 characters from [A-Za-z0-9_-]")
    if name in INTERNAL_TOPICS and not internal:
        raise InvalidNameError(f"{kind} name {name!r} is reserved for the broker's own use")
    for prefix in SYSTEM_PREFIXES:
        if name.startswith(prefix):
            if allow_system and NAME_RE.fullmatch(name[len(prefix):]):
                return name
            raise InvalidNameError(
                f"{kind} name {name!r} uses the reserved prefix {prefix!r}")
    if not NAME_RE.fullmatch(name):
        raise InvalidNameError(
            f"{kind} name {name!r} is invalid: use 1 to 127 characters from "
            f"[A-Za-z0-9_-]")
    return name


def validate_queue(topic: str, queue_id: int) -> None:
    """A queue the store may create a directory for: a valid topic name
    (system and internal ones included) and an id in ``0..MAX_QUEUES-1``."""
    validate_name("topic", topic, allow_system=True, internal=True)
    if not isinstance(queue_id, int) or not 0 <= queue_id < MAX_QUEUES:
        raise InvalidNameError(f"queue id {queue_id!r} of topic {topic!r} is outside "
                               f"0..{MAX_QUEUES - 1}")
