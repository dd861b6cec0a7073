"""The Spark sink: ``df.write.format("duomq")`` and ``writeStream``. Each task
produces its rows through one producer in batches (one request per batch
and topic, or topic and queue for rows with a ``queue`` column); any
send that is not SEND_OK fails the task, and the commit
message reports what each partition sent.

Exactly once: each task's producer is idempotent under an identity made of
the write and the task's partition (a streaming query's id and batch id;
a batch write's ``writeId`` option, else one per job), and it sends the
batch ``k`` of a topic to the topic's queue ``partition + k`` (in the
topic's configured order). A task that runs again (a retried task, a query
restarted from its checkpoint, a batch job run again with the same
``writeId``) sends the same batches, numbered the same, to the same
queues, and the brokers store each once (``store/producer_state.py``)."""

from __future__ import annotations

import hashlib
import logging
import uuid
from dataclasses import dataclass, field

from pyspark.sql.datasource import (
    DataSourceStreamWriter,
    DataSourceWriter,
    WriterCommitMessage,
)

from duomq.client.producer.producer import BATCH_MAX_BYTES, Producer, SendStatus
from duomq.common.errors import ConfigError, DuomqError
from duomq.common.message import Message, MessageQueue
from duomq.coordinator.topics import TopicAdmin

log = logging.getLogger(__name__)
BATCH = 256


@dataclass
class SinkOptions:
    zookeeper: str | None
    cluster: str | None
    topic: str | None
    batch: int
    credentials: str | None = None   # a secured cluster: a credentials file's path
    write_id: str | None = None      # a batch write's name, the same when it is run again

    @classmethod
    def parse(cls, options, columns: list[str]) -> SinkOptions:
        o = {str(k).lower(): v for k, v in dict(options).items()}
        unknown = sorted(set(o) - {"zookeeper", "cluster", "topic", "batchsize", "path",
                                   "credentials", "writeid",
                                   "checkpointlocation"})   # Spark's own, for a writeStream
        if unknown:
            raise ConfigError(f"unknown duomq sink option(s): {', '.join(unknown)}")
        if "body" not in columns:
            raise ConfigError(f"the sink needs a body column (has {', '.join(columns)})")
        if "topic" not in columns and not o.get("topic"):
            raise ConfigError("the sink needs a topic column or the topic option")
        extra = sorted(set(columns) - {"topic", "body", "keys", "tags", "properties", "queue",
                                       "group"})
        if extra:
            raise ConfigError(f"the sink takes topic, queue, group, body, keys, tags and "
                              f"properties; not {', '.join(extra)}")
        if "group" in columns and "queue" not in columns:
            raise ConfigError("the sink's group column needs a queue column (the queue id "
                              "within that broker group)")
        batch = int(o.get("batchsize", BATCH))
        if not 1 <= batch <= 1024:
            raise ConfigError(f"option batchSize: {batch} is not within 1..1024")
        return cls(o.get("zookeeper"), o.get("cluster"), o.get("topic") or None, batch,
                   o.get("credentials") or None, o.get("writeid") or None)


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


def row_message(row, default_topic: str | None) -> tuple[Message, tuple[str | None, int] | None]:
    """The row's message, and the queue it names: None (the producer picks),
    or ``(broker group, queue id)``, or ``(None, n)``: the topic's n-th queue
    counting across its broker groups in order (as Kafka numbers partitions)."""
    d = row.asDict()
    topic = d.get("topic") or default_topic
    if not topic:
        raise DuomqError("a row has no topic (null topic column and no topic option)")
    body = d["body"]
    if body is None:
        raise DuomqError("a row has a null body")
    msg = Message(topic, body, tags=d.get("tags") or "", keys=d.get("keys") or "",
                  properties=dict(d.get("properties") or {}))
    queue = d.get("queue")
    if queue is None:
        if d.get("group") is not None:
            raise DuomqError(f"a row names broker group {d['group']!r} but no queue")
        return msg, None
    return msg, (d.get("group"), int(queue))


def topic_queues(producer: Producer, topic: str) -> list[MessageQueue]:
    """Every queue of the topic by its configuration, broker groups in name
    order (stable while a master is down, unlike the route's)."""
    cfg = TopicAdmin(producer.zk, producer.cluster).describe(topic)
    return [MessageQueue(topic, g, q) for g in sorted(cfg.queues) for q in range(cfg.queues[g])]


def resolve_queue(queues: list[MessageQueue], topic: str,
                  want: tuple[str | None, int]) -> MessageQueue:
    """The queue a row names, among the topic's ``queues``; DuomqError if none."""
    group, n = want
    if group is None:
        if 0 <= n < len(queues):
            return queues[n]
        raise DuomqError(f"row queue {n}: topic {topic!r} has {len(queues)} queues "
                         f"(0..{len(queues) - 1})")
    for mq in queues:
        if mq.broker_group == group and mq.queue_id == n:
            return mq
    raise DuomqError(f"row queue {group}/{n}: topic {topic!r} has no such queue")


def producer_id(write: str, partition: int) -> int:
    """A task's producer identity: the same for every run of it."""
    digest = hashlib.sha256(f"{write}/{partition}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & ((1 << 63) - 1) or 1


def task_identity(default_write: str) -> tuple[str, int]:
    """``(write, partition)`` of the running task: a micro-batch's query id
    and batch id (Spark's local properties, stable across restarts from the
    checkpoint), else the write's own name."""
    from pyspark import TaskContext
    ctx = TaskContext.get()
    if ctx is None:                     # not in a task (a test calling write())
        return default_write, 0
    query, batch = ctx.getLocalProperty("sql.streaming.queryId"), \
        ctx.getLocalProperty("streaming.sql.batchId")
    write = f"stream:{query}:{batch}" if query and batch else default_write
    return write, ctx.partitionId()


class _SinkWriter:
    """What the batch and the streaming writers share: each task sends its rows."""

    def __init__(self, options, schema):
        self.opts = SinkOptions.parse(options, [f.name for f in schema.fields])
        # made on the driver, once per write: every task of it shares it
        self.write_name = f"write:{self.opts.write_id}" if self.opts.write_id \
            else f"job:{uuid.uuid4().hex}"

    def write(self, iterator) -> SinkCommit:
        o = self.opts
        done = SinkCommit()
        write, partition = task_identity(self.write_name)
        # one batch per topic, or per topic and queue for rows that name one
        Key = tuple[str, MessageQueue | None]
        pending: dict[Key, list[Message]] = {}
        batches: dict[str, int] = {}        # topic -> batches sent to queues of our choice
        with Producer("duomq-spark-sink", zookeeper=o.zookeeper, cluster=o.cluster,
                      credentials=o.credentials or "", idempotent=True,
                      producer_id=producer_id(write, partition)) as producer:
            queues: dict[str, list[MessageQueue]] = {}

            def queues_of(topic: str) -> list[MessageQueue]:
                if topic not in queues:
                    queues[topic] = topic_queues(producer, topic)
                return queues[topic]

            def flush(key: Key) -> None:
                topic, mq = key
                msgs = pending.pop(key)
                if mq is None:                  # the same queue in every run of this task
                    k = batches[topic] = batches.get(topic, -1) + 1
                    every = queues_of(topic)
                    mq = every[(partition + k) % len(every)]
                r = producer.send_batch(msgs, queue=mq)
                if r.status is not SendStatus.SEND_OK:
                    raise DuomqError(f"sending {len(msgs)} rows to {mq or topic}: "
                                     f"{r.status.value}")
                done.by_topic[topic] = done.by_topic.get(topic, 0) + len(msgs)

            size: dict[Key, int] = {}
            for row in iterator:
                m, want = row_message(row, o.topic)
                mq = None
                if want is not None:
                    mq = resolve_queue(queues_of(m.topic), m.topic, want)
                key = (m.topic, mq)
                batch = pending.setdefault(key, [])
                batch.append(m)
                size[key] = size.get(key, 0) + len(m.body)
                if len(batch) >= o.batch or size[key] >= BATCH_MAX_BYTES:
                    flush(key)
                    size[key] = 0
            for key in list(pending):
                flush(key)
        return done


class DuomqWriter(_SinkWriter, DataSourceWriter):
    def commit(self, messages) -> None:
        log.info("duomq sink: %s from %d tasks", sent(messages), len(messages))

    def abort(self, messages) -> None:
        log.error("duomq sink aborted after sending %s (a run again with the same writeId "
                  "stores each row once)", sent(messages))


class DuomqStreamWriter(_SinkWriter, DataSourceStreamWriter):
    def commit(self, messages, batchId: int) -> None:
        log.info("duomq sink: batch %d sent %s", batchId, sent(messages))

    def abort(self, messages, batchId: int) -> None:
        log.error("duomq sink: batch %d aborted after sending %s", batchId, sent(messages))
