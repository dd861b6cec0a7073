"""The Spark sink: ``df.write.format("duomq")`` and ``writeStream``. Each task
produces its rows through one producer in batches (one request per batch
and topic); any send that is not SEND_OK fails the task, and the commit
message reports what each partition sent."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from pyspark.sql.datasource import (
    DataSourceStreamWriter,
    DataSourceWriter,
    WriterCommitMessage,
)

from duomq.client.producer import BATCH_MAX_BYTES, Producer, SendStatus
from duomq.common.errors import ConfigError, DuomqError
from duomq.common.message import Message

log = logging.getLogger(__name__)
BATCH = 256


@dataclass
class SinkOptions:
    zookeeper: str | None
    cluster: str | None
    topic: str | None
    batch: int

    @classmethod
    def parse(cls, options, columns: list[str]) -> SinkOptions:
        o = {str(k).lower(): v for k, v in dict(options).items()}
        unknown = sorted(set(o) - {"zookeeper", "cluster", "topic", "batchsize", "path"})
        if unknown:
            raise ConfigError(f"unknown duomq sink option(s): {', '.join(unknown)}")
        if "body" not in columns:
            raise ConfigError(f"the sink needs a body column (has {', '.join(columns)})")
        if "topic" not in columns and not o.get("topic"):
            raise ConfigError("the sink needs a topic column or the topic option")
        extra = sorted(set(columns) - {"topic", "body", "keys", "tags", "properties"})
        if extra:
            raise ConfigError(f"the sink takes topic, body, keys, tags and properties; "
                              f"not {', '.join(extra)}")
        batch = int(o.get("batchsize", BATCH))
        if not 1 <= batch <= 1024:
            raise ConfigError(f"option batchSize: {batch} is not within 1..1024")
        return cls(o.get("zookeeper"), o.get("cluster"), o.get("topic") or None, batch)


@dataclass
class SinkCommit(WriterCommitMessage):
    """What one task sent: rows per topic."""

    by_topic: dict = field(default_factory=dict)


def sent(messages) -> dict[str, int]:
    """Rows per topic over the tasks' commit messages (None for a failed task)."""
    total: dict[str, int] = {}
    for m in messages:
        for topic, n in (m.by_topic if m is not None else {}).items():
            total[topic] = total.get(topic, 0) + n
    return total


def row_message(row, default_topic: str | None) -> Message:
    d = row.asDict()
    topic = d.get("topic") or default_topic
    if not topic:
        raise DuomqError("a row has no topic (null topic column and no topic option)")
    body = d["body"]
    if body is None:
        raise DuomqError("a row has a null body")
    return Message(topic, body, tags=d.get("tags") or "", keys=d.get("keys") or "",
                   properties=dict(d.get("properties") or {}))


class _SinkWriter:
    """What the batch and the streaming writers share: each task sends its rows."""

    def __init__(self, options, schema):
        self.opts = SinkOptions.parse(options, [f.name for f in schema.fields])

    def write(self, iterator) -> SinkCommit:
        o = self.opts
        done = SinkCommit()
        pending: dict[str, list[Message]] = {}
        with Producer(o.zookeeper, o.cluster, group="duomq-spark-sink") as producer:
            def flush(topic):
                msgs = pending.pop(topic)
                r = producer.send_batch(msgs)
                if r.status is not SendStatus.SEND_OK:
                    raise DuomqError(f"sending {len(msgs)} rows to {topic}: {r.status.value}")
                done.by_topic[topic] = done.by_topic.get(topic, 0) + len(msgs)

            size: dict[str, int] = {}
            for row in iterator:
                m = row_message(row, o.topic)
                batch = pending.setdefault(m.topic, [])
                batch.append(m)
                size[m.topic] = size.get(m.topic, 0) + len(m.body)
                if len(batch) >= o.batch or size[m.topic] >= BATCH_MAX_BYTES:
                    flush(m.topic)
                    size[m.topic] = 0
            for topic in list(pending):
                flush(topic)
        return done


class DuomqWriter(_SinkWriter, DataSourceWriter):
    def commit(self, messages) -> None:
        log.info("duomq sink: %s from %d tasks", sent(messages), len(messages))

    def abort(self, messages) -> None:
        log.error("duomq sink aborted after sending %s (at-least-once: a retried task sends "
                  "its rows again)", sent(messages))


class DuomqStreamWriter(_SinkWriter, DataSourceStreamWriter):
    def commit(self, messages, batchId: int) -> None:
        log.info("duomq sink: batch %d sent %s", batchId, sent(messages))

    def abort(self, messages, batchId: int) -> None:
        log.error("duomq sink: batch %d aborted after sending %s", batchId, sent(messages))
