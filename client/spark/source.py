"""The Spark source (batch and streaming) and its planning side.

Planning runs in the driver (one long-lived Python process per streaming
query): it lists the queues of the topics, asks the members the query reads
from (``readFrom``) for their offsets, and cuts ranges. Reading runs in
executor workers on a pickled copy of the reader: no ZooKeeper session or
socket crosses the pickle (``__getstate__``)."""

from __future__ import annotations

import logging
import os
import time

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from duomq.client.cluster.members import read_candidates
from duomq.client.consumer.pull import PullConsumer
from duomq.client.spark.arrow import SCHEMA_DDL
from duomq.client.spark.fetch import ReadTask, read_task
from duomq.client.spark.options import (
    EARLIEST,
    LATEST,
    Flat,
    SourceOptions,
    cap_by_limit,
    flatten,
    nest,
    plan_ranges,
)
from duomq.common.errors import ConfigError, DuomqError, TopicNotExistError
from duomq.common.message import MessageQueue
from duomq.coordinator.topics import TopicAdmin
from duomq.coordinator.zk_login import CREDENTIALS_ENV

log = logging.getLogger(__name__)
DEFAULT_GROUP = "duomq-spark"
PLAN_RETRY_S = 60.0           # planning waits this long for a member to answer
                              # (or pollTimeoutMs, when shorter)


class _Planner:
    """Driver-side view of the topics: queues, offsets, member addresses."""

    def __init__(self, opts: SourceOptions):
        self.opts = opts
        self.client = PullConsumer(opts.consumer_group or DEFAULT_GROUP, zookeeper=opts.zookeeper,
                                   cluster=opts.cluster, read_from=opts.read_from,
                                   max_replica_lag_ms=opts.max_replica_lag_ms,
                                   credentials=opts.credentials or "")

    def close(self) -> None:
        self.client.close()

    def topics(self) -> list[str]:
        """The topics read: as named, or (subscribePattern) every topic whose
        name matches now, so a streaming query picks up topics created later."""
        o = self.opts
        if o.pattern is None:
            return list(o.topics)
        return [t for t in TopicAdmin(self.client.zk, self.client.cluster).list() if o.selects(t)]

    def queues(self) -> list[MessageQueue]:
        out = [mq for t in self.topics() for mq in self.client.queues(t)]
        assign = self.opts.assign
        if assign is None:
            return out
        have = {(mq.topic, mq.broker_group, mq.queue_id) for mq in out}
        missing = sorted(assign - have)
        if missing:
            raise ConfigError(f"option assign names queues the topics do not have: {missing}")
        return [mq for mq in out if (mq.topic, mq.broker_group, mq.queue_id) in assign]

    def _each(self, fn) -> Flat:
        """``fn`` of every queue, retried through a failover (no member
        answering for a while must not fail a streaming query)."""
        deadline = time.monotonic() + min(PLAN_RETRY_S, self.opts.poll_timeout_ms / 1000)
        while True:
            try:
                by_topic: dict[str, list[MessageQueue]] = {}
                for mq in self.queues():
                    by_topic.setdefault(mq.topic, []).append(mq)
                out: Flat = {}
                for topic, mqs in by_topic.items():
                    try:
                        out.update({(mq.topic, mq.broker_group, mq.queue_id): fn(mq)
                                    for mq in mqs})
                    except TopicNotExistError as exc:
                        if self.opts.pattern is None:
                            raise
                        # subscribePattern: a topic created a moment ago has
                        # its route before its brokers load it; a later
                        # trigger reads it
                        log.info("topic %r matches subscribePattern but is not served yet "
                                 "(%s); a later trigger reads it", topic, exc)
                return out
            except DuomqError as exc:
                if not self.client.after_failure(exc) or time.monotonic() > deadline:
                    raise
                log.warning("offsets unavailable (%s); retrying", exc)
                time.sleep(0.5)

    def earliest(self) -> Flat:
        return self._each(self.client.min_offset)

    def latest(self) -> Flat:
        return self._each(self.client.max_offset)

    def by_time(self, timestamp_ms: int) -> Flat:
        return self._each(lambda mq: self.client.offset_by_time(mq, timestamp_ms))

    def starting(self) -> Flat:
        """Where a query starts, as Spark's Kafka source decides it:
        startingTimestamp, else startingOffsetsByTimestamp (queues it omits
        follow startingOffsets), else startingOffsets."""
        o = self.opts
        if o.starting_timestamp is not None:
            return self._at_times(None, o.starting_timestamp, True)
        base = self.resolve(o.starting, None, o.streaming)
        if o.starting_by_timestamp is not None:
            base.update(self._at_times(o.starting_by_timestamp, None, True))
        return base

    def ending(self, start: Flat) -> Flat:
        """Where a batch query ends (exclusive): endingTimestamp, else
        endingOffsetsByTimestamp (queues it omits follow endingOffsets), else
        endingOffsets; never before the start."""
        o = self.opts
        if o.ending_timestamp is not None:
            end = self._at_times(None, o.ending_timestamp, False)
        else:
            end = self.resolve(o.ending, None, True)
            if o.ending_by_timestamp is not None:
                end.update(self._at_times(o.ending_by_timestamp, None, False))
        return {k: max(v, start.get(k, 0)) for k, v in end.items()}

    def _at_times(self, per_queue: Flat | None, every: int | None, starting: bool) -> Flat:
        """The offset of the first message stored at or after each queue's
        timestamp. Where there is none, an ending is the latest offset, and a
        starting follows startingOffsetsByTimestampStrategy (error, latest)."""
        latest = self.latest()
        times = {k: every for k in latest} if every is not None else dict(per_queue or {})
        unknown = sorted(set(times) - set(latest))
        if unknown:
            raise ConfigError(f"timestamps name queues the topics do not have: {unknown}")
        found = self._each(lambda mq: self.client.offset_by_time(
            mq, times[(mq.topic, mq.broker_group, mq.queue_id)])
            if (mq.topic, mq.broker_group, mq.queue_id) in times else -1)
        out = {k: v for k, v in found.items() if k in times}
        if starting and self.opts.timestamp_strategy == "error":
            none = sorted(k for k, v in out.items() if v >= latest[k])
            if none:
                raise ConfigError(
                    f"no message stored at or after the starting timestamp in queues {none} "
                    f"(startingOffsetsByTimestampStrategy=error; 'latest' starts them at "
                    f"their end)")
        return out

    def resolve(self, wanted: str | Flat, timestamp_ms: int | None, default_latest: bool) -> Flat:
        """Concrete offsets for every queue: a timestamp, earliest, latest, or
        the JSON offsets (-2/-1 per queue; queues it omits take the default)."""
        if timestamp_ms is not None:
            return self.by_time(timestamp_ms)
        if wanted == "earliest":
            return self.earliest()
        if wanted == "latest":
            return self.latest()
        if isinstance(wanted, str):
            raise ValueError(f"offsets: {wanted!r} is not earliest, latest or JSON offsets")
        earliest, latest = self.earliest(), self.latest()
        out: Flat = {}
        for key in latest:
            v = wanted.get(key, LATEST if default_latest else EARLIEST)
            out[key] = earliest[key] if v == EARLIEST else latest[key] if v == LATEST else v
        unknown = sorted(set(wanted) - set(latest))
        if unknown:
            raise ValueError(f"offsets name queues the topics do not have: {unknown}")
        return out

    def partitions(self, start: Flat, end: Flat) -> list[InputPartition]:
        o = self.opts
        addresses: dict[str, list[str]] = {}
        out = []
        for r in plan_ranges(start, end, o.max_records_per_partition):
            if r.group not in addresses:
                addresses[r.group] = [m.address for m in read_candidates(
                    self.client.members.of(r.group), o.read_from)]
            out.append(InputPartition(ReadTask(
                r.topic, r.group, r.queue_id, r.start, r.end, addresses[r.group],
                self.client.zookeeper, self.client.cluster, o.read_from, o.fail_on_data_loss,
                o.fetch_messages, o.consumer_group or DEFAULT_GROUP, o.subscription,
                o.max_replica_lag_ms, o.poll_timeout_ms / 1000,
                # the executors read the same file (the option's, else the driver's
                # $DUOMQ_CREDENTIALS); None: the cluster is not secured
                (o.credentials or os.environ.get(CREDENTIALS_ENV))
                if self.client.credentials is not None else None)))
        return out

    def commit(self, offsets: Flat) -> None:
        """Lag reporting for ``consumerGroup`` (the checkpoint stays the truth,
        so a commit that fails during a failover is only logged)."""
        by_mq = {MessageQueue(t, g, q): off for (t, g, q), off in offsets.items()}
        try:
            self.client.commit(by_mq)
        except DuomqError as exc:
            log.warning("could not commit the query's offsets for lag reporting: %s", exc)


class _Planned:
    """A planner made on first use and dropped from pickles."""

    def __init__(self, options, streaming: bool):
        self.opts = SourceOptions.parse(options, streaming)
        self._planner: _Planner | None = None

    @property
    def planner(self) -> _Planner:
        if self._planner is None:
            self._planner = _Planner(self.opts)
        return self._planner

    def __getstate__(self):
        return {**self.__dict__, "_planner": None}

    def read(self, partition: InputPartition):
        if partition.value is None:       # nothing to read: Spark still runs one empty task
            return
        yield from read_task(partition.value)


class DuomqBatchReader(_Planned, DataSourceReader):
    def __init__(self, options):
        _Planned.__init__(self, options, streaming=False)

    def partitions(self):
        p = self.planner
        try:
            start = p.starting()
            return p.partitions(start, p.ending(start))
        finally:
            p.close()
            self._planner = None


class DuomqStreamReader(_Planned, DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options):
        _Planned.__init__(self, options, streaming=True)
        self._target: Flat | None = None      # Trigger.AvailableNow: read up to here
        self._seen: Flat | None = None        # the latest offsets latestOffset last saw
        self._last_trigger: float | None = None   # monotonic: the last batch with data

    def initialOffset(self) -> dict:
        return nest(self.planner.starting())

    def getDefaultReadLimit(self):
        n = self.opts.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.planner.latest()

    def latestOffset(self, start: dict, limit) -> dict:
        begin = flatten(start)
        self._seen = self.planner.latest() if self._target is None else self._target
        # a queue the planner cannot see this time (a topic not served for a
        # moment) keeps its offset rather than dropping out and restarting
        # from its earliest offset when it is back
        latest = {**begin, **{k: max(v, begin.get(k, 0)) for k, v in self._seen.items()}}
        now = time.monotonic()
        if self._last_trigger is None:
            self._last_trigger = now          # Kafka: the delay counts from the query's start
        o = self.opts
        if o.min_offsets_per_trigger and self._target is None:
            # minOffsetsPerTrigger: no batch until that many offsets wait, or
            # maxTriggerDelay passed since the last batch with some data waiting
            waiting = sum(v - begin.get(k, 0) for k, v in latest.items())
            late = now - self._last_trigger >= o.max_trigger_delay_ms / 1000
            if waiting < o.min_offsets_per_trigger and not (late and waiting > 0):
                return start
        if isinstance(limit, ReadMaxRows):
            latest = cap_by_limit(begin, latest, limit.max_rows)
        if latest != {k: begin.get(k, 0) for k in latest}:
            self._last_trigger = now
        return nest(latest)

    def reportLatestOffset(self):
        return nest(self._seen) if self._seen is not None else None

    def partitions(self, start: dict, end: dict):
        p = self.planner
        end_f = flatten(end)
        begin = flatten(start)
        if set(end_f) - set(begin):                   # queues added since: from their start
            earliest = p.earliest()
            begin = {**{k: earliest.get(k, 0) for k in end_f}, **begin}
        return p.partitions(begin, end_f)

    def commit(self, end: dict) -> None:
        if self.opts.consumer_group:
            self.planner.commit(flatten(end))

    def stop(self) -> None:
        if self._planner is not None:
            self._planner.close()
            self._planner = None


class DuomqDataSource(DataSource):
    """``spark.read.format("duomq")``, ``spark.readStream.format("duomq")`` and
    the sink ``df.write.format("duomq")``."""

    @classmethod
    def name(cls) -> str:
        return "duomq"

    def schema(self) -> str:
        return SCHEMA_DDL

    def reader(self, schema):
        return DuomqBatchReader(self.options)

    def streamReader(self, schema):
        return DuomqStreamReader(self.options)

    def writer(self, schema, overwrite: bool):
        from duomq.client.spark.sink import DuomqWriter
        return DuomqWriter(self.options, schema)

    def streamWriter(self, schema, overwrite: bool):
        from duomq.client.spark.sink import DuomqStreamWriter
        return DuomqStreamWriter(self.options, schema)
