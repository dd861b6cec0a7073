"""Options and offset planning of the Spark source and sink (pure: no I/O).

Offsets are JSON per topic, broker group and queue, as in Spark's Kafka
source: ``{"Clicks": {"broker-a": {"0": 42, "1": -2}}}`` where -2 means the
earliest and -1 the latest offset of that queue. Inside, a flat form keyed
by ``(topic, group, queue_id)`` is used.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from duomq.common import duration
from duomq.common.errors import BadRequestError, ConfigError
from duomq.common.subscription import parse as parse_subscription

EARLIEST, LATEST = -2, -1
READ_FROM = ("slave", "slave_preferred", "master")

QueueKey = tuple[str, str, int]           # (topic, broker group, queue id)
Flat = dict[QueueKey, int]


def _bool(name: str, value: str) -> bool:
    v = str(value).strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise ConfigError(f"option {name}: {value!r} is not true or false")


def _int(name: str, value, minimum: int) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        raise ConfigError(f"option {name}: {value!r} is not an integer") from None
    if n < minimum:
        raise ConfigError(f"option {name}: {n} is below {minimum}")
    return n


KNOWN = {"zookeeper", "cluster", "topic", "subscribe", "subscribepattern", "assign",
         "startingoffsets", "endingoffsets", "startingtimestamp", "endingtimestamp",
         "startingoffsetsbytimestamp", "endingoffsetsbytimestamp",
         "startingoffsetsbytimestampstrategy", "maxoffsetspertrigger", "minoffsetspertrigger",
         "maxtriggerdelay", "maxrecordsperpartition", "failondataloss", "consumergroup",
         "readfrom", "fetchmessages", "subscription", "path", "maxreplicalagms",
         "polltimeoutms", "credentials"}
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60_000      # Kafka's 15m


@dataclass(frozen=True)
class SourceOptions:
    zookeeper: str | None
    cluster: str | None
    topics: tuple[str, ...]          # topic / subscribe: these topics
    starting: str | Flat             # "earliest", "latest" or per-queue offsets
    ending: str | Flat               # batch only: "latest" or per-queue offsets
    starting_timestamp: int | None   # ms: the first message stored at or after it
    ending_timestamp: int | None     # ms, batch only: messages stored before it
    max_offsets_per_trigger: int | None
    max_records_per_partition: int
    fail_on_data_loss: bool
    consumer_group: str | None
    read_from: str
    fetch_messages: int              # most messages one pull asks for
    subscription: str = "*"          # `*` or `TagA || TagB`: only messages with those tags
    max_replica_lag_ms: int = 0      # read a slave only within this lag (0: no bound)
    pattern: str | None = None       # subscribePattern: every topic whose name matches
    assign: frozenset[QueueKey] | None = None   # assign: exactly these queues
    starting_by_timestamp: Flat | None = None   # per-queue timestamps (ms)
    ending_by_timestamp: Flat | None = None     # batch only, per-queue timestamps (ms)
    timestamp_strategy: str = "error"   # no message at or after a starting timestamp:
                                        # "error" fails the query, "latest" starts at the end
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    streaming: bool = False
    credentials: str | None = None   # a secured cluster: a credentials file's path, readable
                                     # by the driver and every executor
    poll_timeout_ms: int = 120_000   # a task waits this long for a member to serve its range

    @classmethod
    def parse(cls, options, streaming: bool) -> SourceOptions:
        o = {str(k).lower(): v for k, v in dict(options).items()}
        unknown = sorted(set(o) - KNOWN)
        if unknown:
            raise ConfigError(f"unknown duomq source option(s): {', '.join(unknown)}")
        topics, pattern, assign = _what(o)
        starting = parse_offsets("startingOffsets", o.get("startingoffsets",
                                                          "latest" if streaming else "earliest"))
        ending = parse_offsets("endingOffsets", o.get("endingoffsets", "latest"))
        for name in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp"):
            if streaming and name in o:
                raise ConfigError(f"option {_NAMES[name]} is for batch queries only")
        if ending == "earliest":
            raise ConfigError("option endingOffsets cannot be earliest")
        if isinstance(ending, dict) and any(v == EARLIEST for v in ending.values()):
            raise ConfigError("option endingOffsets cannot hold -2 (earliest)")
        start_ts = _int("startingTimestamp", o["startingtimestamp"], 0) \
            if "startingtimestamp" in o else None
        end_ts = _int("endingTimestamp", o["endingtimestamp"], 0) \
            if "endingtimestamp" in o else None
        if start_ts is not None and end_ts is not None and end_ts < start_ts:
            raise ConfigError("option endingTimestamp is before startingTimestamp")
        start_by_ts = parse_timestamps("startingOffsetsByTimestamp",
                                       o.get("startingoffsetsbytimestamp"))
        end_by_ts = parse_timestamps("endingOffsetsByTimestamp",
                                     o.get("endingoffsetsbytimestamp"))
        strategy = str(o.get("startingoffsetsbytimestampstrategy", "error")).strip().lower()
        if strategy not in ("error", "latest"):
            raise ConfigError(f"option startingOffsetsByTimestampStrategy: {strategy!r} is not "
                              f"error or latest")
        try:
            subscription = parse_subscription(str(o.get("subscription", "*"))).expression
        except BadRequestError as exc:
            raise ConfigError(f"option subscription: {exc}") from None
        read_from = str(o.get("readfrom", "slave_preferred")).strip().lower()
        if read_from not in READ_FROM:
            raise ConfigError(f"option readFrom: {read_from!r} is not one of {', '.join(READ_FROM)}")
        max_per, min_per, delay = _trigger(o, streaming)
        return cls(
            zookeeper=o.get("zookeeper"), cluster=o.get("cluster"), topics=topics,
            starting=starting, ending=ending, starting_timestamp=start_ts,
            ending_timestamp=end_ts, max_offsets_per_trigger=max_per,
            max_records_per_partition=_int("maxRecordsPerPartition",
                                           o.get("maxrecordsperpartition", 1_000_000), 1),
            fail_on_data_loss=_bool("failOnDataLoss", o.get("failondataloss", "true")),
            consumer_group=o.get("consumergroup") or None, read_from=read_from,
            fetch_messages=_int("fetchMessages", o.get("fetchmessages", 1024), 1),
            subscription=subscription,
            max_replica_lag_ms=_int("maxReplicaLagMs", o.get("maxreplicalagms", 0), 0),
            pattern=pattern, assign=assign, starting_by_timestamp=start_by_ts,
            ending_by_timestamp=end_by_ts, timestamp_strategy=strategy,
            min_offsets_per_trigger=min_per, max_trigger_delay_ms=delay, streaming=streaming,
            poll_timeout_ms=_int("pollTimeoutMs", o.get("polltimeoutms", 120_000), 1),
            credentials=o.get("credentials") or None)

    def selects(self, topic: str) -> bool:
        """subscribePattern: whether a topic's name matches (the whole name, as
        Kafka's Java regex does); system topics (%RETRY%, %DLQ%) never do."""
        return self.pattern is not None and not topic.startswith("%") and \
            re.fullmatch(self.pattern, topic) is not None


_NAMES = {"endingoffsets": "endingOffsets", "endingtimestamp": "endingTimestamp",
          "endingoffsetsbytimestamp": "endingOffsetsByTimestamp"}


def _what(o: dict) -> tuple[tuple[str, ...], str | None, Any]:
    """The topics (topic, subscribe), a pattern (subscribePattern) or the
    queues (assign) a query reads: exactly one of them."""
    chosen = [k for k in ("topic", "subscribe", "subscribepattern", "assign") if k in o]
    if len(chosen) != 1:
        raise ConfigError("give exactly one of the options topic (or subscribe: topics, "
                          "comma-separated), subscribePattern (a regex over topic names) "
                          f"and assign (JSON queues){'; got ' + ', '.join(chosen) if chosen else ''}")
    topics: tuple[str, ...] = ()
    pattern = assign = None
    if chosen[0] in ("topic", "subscribe"):
        topics = tuple(t.strip() for t in str(o[chosen[0]]).split(",") if t.strip())
        if not topics:
            raise ConfigError(f"option {chosen[0]}: no topic named")
    elif chosen[0] == "subscribepattern":
        pattern = str(o["subscribepattern"])
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigError(f"option subscribePattern: {pattern!r} is not a regular "
                              f"expression ({exc})") from None
    else:
        assign = parse_assign(o["assign"])
        topics = tuple(sorted({t for t, _g, _q in assign}))
    return topics, pattern, assign


def _trigger(o: dict, streaming: bool) -> tuple[int | None, int | None, int]:
    """maxOffsetsPerTrigger, minOffsetsPerTrigger and maxTriggerDelay (ms)."""
    max_per = _int("maxOffsetsPerTrigger", o["maxoffsetspertrigger"], 1) \
        if "maxoffsetspertrigger" in o else None
    min_per = _int("minOffsetsPerTrigger", o["minoffsetspertrigger"], 1) \
        if "minoffsetspertrigger" in o else None
    if min_per is not None and not streaming:
        raise ConfigError("option minOffsetsPerTrigger is for streaming queries only")
    if min_per is not None and max_per is not None and min_per > max_per:
        raise ConfigError(f"option minOffsetsPerTrigger ({min_per}) is above "
                          f"maxOffsetsPerTrigger ({max_per})")
    if "maxtriggerdelay" in o and min_per is None:
        raise ConfigError("option maxTriggerDelay needs minOffsetsPerTrigger")
    try:
        delay = duration.parse_ms(str(o["maxtriggerdelay"])) if "maxtriggerdelay" in o \
            else DEFAULT_MAX_TRIGGER_DELAY_MS
    except ValueError as exc:
        raise ConfigError(f"option maxTriggerDelay: {exc}") from None
    return max_per, min_per, delay


def parse_assign(value) -> frozenset[QueueKey]:
    """``assign``: ``{"Clicks": {"broker-a": [0, 1]}}``, the queues to read."""
    try:
        doc = json.loads(value) if isinstance(value, str) else value
        keys = frozenset((str(t), str(g), int(q)) for t, groups in doc.items()
                         for g, queues in groups.items() for q in queues)
    except (json.JSONDecodeError, AttributeError, TypeError, ValueError):
        raise ConfigError('option assign: JSON queues look like {"topic": {"broker-group": '
                          '[0, 1]}}') from None
    if not keys:
        raise ConfigError("option assign: no queue named")
    return keys


def parse_timestamps(name: str, value) -> Flat | None:
    """``{"topic": {"broker-group": {"0": 1763800000000}}}``: ms per queue."""
    if value is None:
        return None
    flat = parse_offsets(name, value)
    if isinstance(flat, str) or any(v < 0 for v in flat.values()):
        raise ConfigError(f'option {name}: JSON timestamps (ms) look like '
                          '{"topic": {"broker-group": {"0": 1763800000000}}}')
    return flat


def parse_offsets(name: str, value) -> str | Flat:
    """``earliest``, ``latest`` or the JSON form; raise ConfigError."""
    if isinstance(value, str) and value.strip().lower() in ("earliest", "latest"):
        return value.strip().lower()
    try:
        doc = json.loads(value) if isinstance(value, str) else value
    except json.JSONDecodeError as exc:
        raise ConfigError(f"option {name}: not earliest, latest or JSON offsets ({exc})") from None
    try:
        flat = flatten(doc)
    except (AttributeError, TypeError, ValueError):
        raise ConfigError(f"option {name}: JSON offsets look like "
                          '{"topic": {"broker-group": {"0": 12, "1": -2}}}') from None
    if any(v < EARLIEST for v in flat.values()):
        raise ConfigError(f"option {name}: an offset is below -2")
    return flat


def flatten(doc: dict) -> Flat:
    return {(str(t), str(g), int(q)): int(off)
            for t, groups in doc.items() for g, queues in groups.items()
            for q, off in queues.items()}


def nest(flat: Flat) -> dict:
    """The JSON form Spark checkpoints (sorted, so equal offsets serialise equally)."""
    out: dict = {}
    for (t, g, q), off in sorted(flat.items()):
        out.setdefault(t, {}).setdefault(g, {})[str(q)] = off
    return out


@dataclass(frozen=True)
class Range:
    """Queue offsets [start, end) of one Spark partition."""

    topic: str
    group: str
    queue_id: int
    start: int
    end: int


def plan_ranges(start: Flat, end: Flat, max_records: int) -> list[Range]:
    """One range per queue with something to read, split above ``max_records``.
    A queue missing from ``start`` (new since the query began) starts at 0."""
    out = []
    for key in sorted(end):
        s, e = start.get(key, 0), end[key]
        while s < e:
            n = min(max_records, e - s)
            out.append(Range(*key, s, s + n))
            s += n
    return out


def cap_by_limit(start: Flat, latest: Flat, max_rows: int) -> Flat:
    """Spread ``max_rows`` over the queues in proportion to what each has to
    read (Spark's Kafka ``maxOffsetsPerTrigger``); every queue with data moves
    by at least one while the limit allows."""
    avail = {k: max(0, latest[k] - start.get(k, 0)) for k in latest}
    total = sum(avail.values())
    if total <= max_rows:
        return dict(latest)
    out, left = {}, max_rows
    for k in sorted(avail, key=lambda k: -avail[k]):
        share = min(avail[k], left, max(1, avail[k] * max_rows // total) if avail[k] else 0)
        out[k] = start.get(k, 0) + share
        left -= share
    return out
