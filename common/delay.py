"""Delayed delivery (pure): RocketMQ's delay levels, an arbitrary delivery
time on top of them, and the properties that carry both.

A delayed message is stored in the internal topic ``SCHEDULE_TOPIC``, in the
queue of its level (``level - 1``); every message of one queue waits the same
time, so each queue comes due in the order it was written and the broker's
schedule service reads it like a consumer. A message with ``DELIVER_AT`` (a
timer message) is stored in ``TIMER_TOPIC`` and fired at its time by the
master's timer service (``master/timers.py``, over ``timer/``); one that a
broker before timers stored in the schedule topic rides the levels as a
timing wheel would: it goes to the longest level not past its time, comes
due, and goes on to the next level until less than the shortest level is
left, then to its topic.
"""

from __future__ import annotations

from duomq.common.duration import parse_ms
from duomq.common.errors import ConfigError
from duomq.common.names import SCHEDULE_TOPIC as SCHEDULE_TOPIC  # where delays are stored

SCHEDULE_GROUP = "%SCHEDULE%"              # its progress lives in the offset table
TIMER_GROUP = "%TIMER%"                    # the timers' fire progress, in the offset table
DEFAULT_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"

# message properties
DELAY = "DELAY"                        # delay level asked for (1-based)
DELIVER_AT = "DELIVER_AT"              # delivery time asked for, epoch ms
REAL_TOPIC = "REAL_TOPIC"              # where a scheduled message goes when due
REAL_QID = "REAL_QID"
RETRY_TOPIC = "RETRY_TOPIC"            # a retried message's original topic
RECONSUME_TIME = "RECONSUME_TIME"      # times a message was sent back for a retry
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"  # the id of the first stored copy
RECALL_OF = "RECALL_OF"                # a recall record: the commit-log offset of its timer
TIMER_ORIGIN = "TIMER_ORIGIN"          # a timer's copy rolled forward: its first copy's offset
BROKER_ONLY = frozenset((RECALL_OF, TIMER_ORIGIN))   # what only the broker writes
SCHEDULING = frozenset((DELAY, DELIVER_AT, REAL_TOPIC, REAL_QID))



def parse_levels(text: str) -> tuple[int, ...]:
    """``"1s 5s 10s ..."`` -> delays in ms, strictly rising."""
    out = []
    for word in text.split():
        try:
            delay = parse_ms(word)
        except ValueError:
            delay = 0
        if delay <= 0:
            raise ConfigError(f"message_delay_level: {word!r} is not a delay like 5s, 2m or 1h")
        out.append(delay)
    if not out:
        raise ConfigError("message_delay_level: no level given")
    if any(b <= a for a, b in zip(out, out[1:], strict=False)):
        raise ConfigError(f"message_delay_level: levels must rise: {text!r}")
    if len(out) > 64:
        raise ConfigError("message_delay_level: at most 64 levels")
    return tuple(out)


def hop_level(levels: tuple[int, ...], remaining_ms: int) -> int:
    """The level (1-based) a message with ``remaining_ms`` to wait goes to
    next: the longest not past its time, else the shortest. 0: due now."""
    if remaining_ms <= 0:
        return 0
    level = 1
    for i, delay in enumerate(levels, 1):
        if delay > remaining_ms:
            break
        level = i
    return level


def retry_level(levels: tuple[int, ...], reconsume_times: int) -> int:
    """A failed message's delay level: 3 + the times it was retried, capped."""
    return min(3 + reconsume_times, len(levels))
