"""The producer: ``send``, ``send_async``, ``send_oneway`` and ``send_batch``.

A send goes to one queue (round robin, a sharding key's hash, or the user's
selector). Records are encoded here in the commit log's layout, one request
per batch. A failed attempt (timeout, broker gone, not master) is retried on
another broker group up to ``retry_times_when_send_failed`` times; stored but
not durable outcomes (``FLUSH_DISK_TIMEOUT``, ``FLUSH_SLAVE_TIMEOUT``,
``SLAVE_NOT_AVAILABLE``) come back as results, retried elsewhere only with
``retry_another_broker_when_not_store_ok``.

Order: blocking sends from one thread reach a queue in the order they were
made, and so do asynchronous sends among themselves; a blocking and an
asynchronous send travel on different sockets and keep no order between them.
"""

from __future__ import annotations

import enum
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from duomq.client.base import ClientBase
from duomq.client.metrics import FAILURE, SUCCESS, error_name
from duomq.client.selector import FaultAvoidance, RoundRobinSelector, select_by_key
from duomq.common.config import FRAME_ENVELOPE_BYTES, ProducerConfig
from duomq.common.delay import SCHEDULING
from duomq.common.errors import (
    BrokerUnreachableError,
    ConfigError,
    DuomqError,
    InvalidNameError,
    MessageTooLargeError,
    NoRouteError,
    for_status,
)
from duomq.common.idempotence import sequencing
from duomq.common.message import Message, MessageQueue, make_msg_id
from duomq.common.names import validate_name
from duomq.common.transaction import TRANSACTION
from duomq.format import native
from duomq.format import record as rec
from duomq.proto import pb

log = logging.getLogger(__name__)


class SendStatus(str, enum.Enum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"     # stored, not fsynced in time
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"   # stored, no slave confirmed in time
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"   # stored, no in-sync slave to confirm


_STORED: dict[int, SendStatus] = {
    pb.OK: SendStatus.SEND_OK, pb.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    pb.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    pb.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE}


@dataclass
class SendResult:
    status: SendStatus
    msg_id: str                               # the first message of the batch
    queue: MessageQueue
    queue_offset: int                         # queue offset of the first message
    physical_offsets: Sequence[int] = ()      # commit-log offset of every message
    broker_group: str = ""
    in_sync_replicas: int = 0                 # the master's slaves in sync when it acked
    degraded: bool = False                    # SYNC acked with fewer than sync_replicas
                                              # slaves (the group's min_sync_replicas)
    epoch: int = 0                            # the group's master epoch that stored it
    duplicate: bool = False                   # a retry of a batch stored before: not stored
                                              # again (offsets: the first store's, if known)

    @property
    def ok(self) -> bool:
        return self.status is SendStatus.SEND_OK

    @property
    def msg_ids(self) -> list[str]:
        """Every message id of the batch (formatted on demand: most callers
        never read them, and formatting 256 ids costs as much as a send)."""
        return [make_msg_id(self.broker_group, p) for p in self.physical_offsets]


Selector = Callable[[list[MessageQueue], Message, object], MessageQueue]
BATCH_MAX_BYTES = 4 << 20   # tools that batch (the CLI, the Spark sink) send at most about this
                            # much per request: well below a broker's max_frame_bytes
_BORN = rec.fields("born_ts_ms")
BROKER_ROUTED = frozenset(SCHEDULING | {TRANSACTION})   # properties that send a message elsewhere first
ATTEMPT_GRACE_S = 2.0   # an attempt waits the broker's ack wait plus this, if retries remain


def encode_batch(msgs: Sequence[Message], topic: str, born_ts_ms: int, host: bytes,
                 max_message_bytes: int,
                 numbering: dict[str, str] | None = None) -> tuple[bytes, bool]:
    """The records of a batch of messages of ``topic``, concatenated, and
    whether one of them asks for a delay or a transaction (pure).
    ``numbering``: an idempotent batch's properties
    (``common.idempotence.sequencing``), put in its first record, which
    carries ``FLAG_SEQUENCED``: the batch is encoded once, with them; a batch
    the broker writes elsewhere first (a delay, a transaction) is never
    numbered (it comes back unnumbered, ``scheduled`` true). The hot path: a
    message without properties is packed inline (a plain one from its size,
    payload CRC and body length around a header middle shared by the batch); the
    others go through ``record.encode_record``. With the C loops
    (``format/native.py``) a batch is encoded in one C loop, to the same
    bytes, unless a message asks for a delay or a transaction or is not the
    common case (the loop says None and this one encodes it)."""
    given = msgs
    msgs, flags = _numbered(msgs, numbering)
    loops = native.LOOPS
    if loops is not None:
        done = loops.encode(msgs, topic, born_ts_ms, host, max_message_bytes, BROKER_ROUTED,
                            flags)
        if done is not None:
            return done, False
    topic_b = topic.encode()
    lt = len(topic_b)
    plain_size = rec.HEADER_SIZE + lt
    pack, crc, magic = rec.HEADER.pack, rec.payload_crc, rec.RECORD_MAGIC
    topic_crc = crc(topic_b)       # a payload starts with the topic: its CRC goes on from here
    lead, middle = rec.LEAD.pack, rec.plain_header_middle(born_ts_ms, host, lt)
    tails: dict[int, bytes] = {}   # body length -> its 4 bytes and the topic that follows
    parts: list[bytes] = []
    append = parts.append
    scheduled = False
    for m in msgs:
        if m.topic != topic:
            raise ValueError(f"a batch must hold one topic: {topic!r} and {m.topic!r}")
        body = m.body
        if type(body) is not bytes:   # bytearray or memoryview: len() must count bytes
            body = bytes(body)
        if m.properties:
            if not scheduled:
                scheduled = not BROKER_ROUTED.isdisjoint(m.properties)
            r = rec.encode_record(topic_b, m.tags.encode() if m.tags else b"",
                                  m.keys.encode() if m.keys else b"",
                                  rec.encode_properties(m.properties), body, born_ts_ms, host,
                                  flags)
            flags = 0                  # the first record's only
            size = len(r)
        elif m.tags or m.keys:
            tags = m.tags.encode() if m.tags else b""
            keys = m.keys.encode() if m.keys else b""
            lg, lk, lb = len(tags), len(keys), len(body)
            if lg > 0xFFFF or lk > 0xFFFF:
                raise rec.RecordError("tags and keys are limited to 65535 bytes each")
            size = plain_size + lg + lk + lb
            append(pack(size, magic, crc(body, crc(keys, crc(tags, topic_crc))), 0, 0, 0,
                        born_ts_ms, 0, host, 0, lt, lg, lk, 0, lb))
            append(topic_b)
            append(tags)
            append(keys)
            r = body
        else:
            lb = len(body)
            size = plain_size + lb
            tail = tails.get(lb)
            if tail is None:
                tail = tails[lb] = rec.BODY_LEN.pack(lb) + topic_b
            append(lead(size, magic, crc(body, topic_crc)))
            append(middle)
            append(tail)
            r = body
        if size > max_message_bytes:
            raise MessageTooLargeError(f"message of {size} bytes (with header) exceeds "
                                       f"max_message_bytes ({max_message_bytes})")
        append(r)
    if scheduled and numbering is not None:   # routed by the broker: not numbered
        return encode_batch(given, topic, born_ts_ms, host, max_message_bytes)
    return b"".join(parts), scheduled


def _numbered(msgs: Sequence[Message],
              numbering: dict[str, str] | None) -> tuple[Sequence[Message], int]:
    """The batch with ``numbering`` in its first message's properties (a
    copy: the caller's message is left as it is), and the first record's flags."""
    if numbering is None:
        return msgs, 0
    first = msgs[0]
    return [Message(first.topic, first.body, first.tags, first.keys,
                    {**first.properties, **numbering}), *msgs[1:]], rec.FLAG_SEQUENCED


def _local_host() -> bytes:
    try:
        ip = socket.gethostbyname(socket.gethostname())
    except OSError:
        ip = "127.0.0.1"
    return rec.pack_host(ip, os.getpid())


class Producer(ClientBase):
    def __init__(self, zookeeper: str | None = None, cluster: str | None = None,
                 group: str = "DEFAULT_PRODUCER", *, config: ProducerConfig | None = None,
                 zk=None, **overrides):
        cfg = config or ProducerConfig(group=group, **overrides)
        self.config = cfg
        self._callbacks = ThreadPoolExecutor(1, thread_name_prefix="duomq-send-callback")
        self._retries = ThreadPoolExecutor(2, thread_name_prefix="duomq-send-retry")
        self._rr = RoundRobinSelector()
        self._checked: set[tuple[str, object]] = set()
        self._faults = FaultAvoidance(cfg.fault_avoidance_ms / 1000)
        self._host = _local_host()
        # idempotent sends: batches numbered per queue under this id
        self.producer_id = cfg.producer_id or secrets.randbits(63) or 1
        self._seqs: dict[MessageQueue, int] = {}
        self._seq_lock = threading.Lock()
        super().__init__(zookeeper, cluster, zk=zk)
        try:
            for broker in self.registered_brokers():   # refuse a contradiction up front
                cfg.check_broker(broker.group, broker.max_ack_wait_ms)
        except ConfigError:
            self.close()
            raise

    # ------------------------------------------------------------ public API
    def send(self, msg: Message, *, sharding_key: str | None = None,
             selector: Selector | None = None, arg=None, queue: MessageQueue | None = None,
             timeout_ms: int | None = None) -> SendResult:
        """Send one message and wait for the broker's answer."""
        return self.send_batch([msg], sharding_key=sharding_key, selector=selector, arg=arg,
                               queue=queue, timeout_ms=timeout_ms)

    def send_batch(self, msgs: Sequence[Message], *, sharding_key: str | None = None,
                   selector: Selector | None = None, arg=None, queue: MessageQueue | None = None,
                   timeout_ms: int | None = None) -> SendResult:
        """Send messages of one topic as one batch to one queue (one request,
        one write, one fsync). The result names the first message; ``msg_ids``
        lists them all. Blocking sends do their own socket I/O (no thread hop)."""
        if self.metrics is None:
            return self._send_blocking(msgs, sharding_key, selector, arg, queue, timeout_ms)
        t0 = time.perf_counter()
        try:
            result = self._send_blocking(msgs, sharding_key, selector, arg, queue, timeout_ms)
        except Exception as exc:
            self._count_send(msgs, t0, None, exc)
            raise
        self._count_send(msgs, t0, result, None)
        return result

    def _send_blocking(self, msgs, sharding_key, selector, arg, queue, timeout_ms) -> SendResult:
        topic, encoded = self._encode(msgs)
        att = self._attempts(msgs, timeout_ms, sharding_key, selector, queue, None)
        while True:
            mq = None
            seen = self.routes.version(topic)
            try:
                mq, address, timeout_s, limit = self._target(topic, msgs, sharding_key, selector,
                                                             arg, att.sequenced or queue, att)
                sent = self._sequence(msgs, topic, mq, encoded, att)
                raw = self.remoting.call(address, pb.SEND,
                                         self._request(topic, mq, msgs, sent, limit), timeout_s)
                result = att.judge(*raw, mq)
            except Exception as exc:
                self._release_if_no_failover(att, mq, exc)
                if att.retry_after_error(exc, mq):
                    self._await_master(topic, seen, exc, att)
                    continue
                return att.give_up(exc)
            if result is not None:
                return result

    def send_async(self, msg: Message | Sequence[Message], callback: Callable | None = None, *,
                   sharding_key: str | None = None, selector: Selector | None = None, arg=None,
                   queue: MessageQueue | None = None, timeout_ms: int | None = None) -> Future:
        """Send without waiting. Returns a Future of SendResult; ``callback(result,
        exception)`` runs on a callback thread once the send ends."""
        msgs = [msg] if isinstance(msg, Message) else list(msg)
        fut = self._send(msgs, sharding_key, selector, arg, queue, timeout_ms)
        if callback is not None:
            def done(f):
                exc = f.exception()
                self._callbacks.submit(callback, None if exc else f.result(), exc)
            fut.add_done_callback(done)
        return fut

    def send_oneway(self, msg: Message, *, sharding_key: str | None = None) -> None:
        """Fire and forget: no result, no retry."""
        self._send([msg], sharding_key, None, None, None, None, retries=0)

    def heartbeat_groups(self):
        return [self.config.group], []

    # ------------------------------------------------------------ internals
    def _encode(self, msgs: Sequence[Message]) -> tuple[str, tuple[bytes, bool] | None]:
        if not msgs:
            raise ValueError("nothing to send")
        if len(msgs) > self.config.batch_max_messages:
            raise ValueError(f"a batch holds at most {self.config.batch_max_messages} messages "
                             f"(batch_max_messages)")
        topic = msgs[0].topic
        validate_name("topic", topic, allow_system=True)
        if self.config.idempotent:     # encoded once its queue is known, with its numbering
            return topic, None
        return topic, encode_batch(msgs, topic, time.time_ns() // 1_000_000, self._host,
                                   self.config.max_message_bytes)

    def _target(self, topic, msgs, sharding_key, selector, arg, queue, att):
        """One attempt's (queue, broker address, timeout, frame limit), all from
        one route snapshot: the queue chosen (given, by selector, by key, or
        round robin away from failed groups), its master's address, the
        broker's longest ack wait plus the attempt grace, and the largest
        request frame it reads (0: not published)."""
        route = self.route(topic)
        for g in route.groups.values():
            key = (g.group, g.max_ack_wait_ms)
            if key not in self._checked:       # once per broker setting, not per send
                self.config.check_broker(g.group, g.max_ack_wait_ms)
                self._checked.add(key)
        mq = queue
        if mq is None:
            queues = route.queues(writable=True)
            if not queues:
                raise DuomqError(f"topic {topic!r} has no writable queue")
            if selector is not None:
                mq = selector(queues, msgs[0], arg)
            elif sharding_key is not None:
                mq = select_by_key(queues, sharding_key)
            else:
                # a group whose master cannot ack now (SYNC, too few slaves) is
                # avoided while another can take the message
                slow = {g for g, r in route.groups.items() if not r.acks}
                mq = self._rr.select(queues, att.avoid | self._faults.avoided(time.monotonic())
                                     | slow)
        served = route.groups.get(mq.broker_group)
        if served is None:
            raise NoRouteError(f"broker group {mq.broker_group!r} is not serving {topic!r}")
        return (mq, served.address,
                att.attempt_s(served.max_ack_wait_ms / 1000), served.max_frame_bytes)

    def _sequence(self, msgs, topic: str, mq: MessageQueue, encoded, att):
        """What an attempt sends. An idempotent send's first attempt takes the
        next sequence of ``mq`` and encodes the batch once, with its
        numbering in the first record (flagged), and the send is pinned to
        ``mq``, so that every retry is the same batch to the same queue (its
        master now, or the next one after a failover). Delayed and
        transactional batches are not numbered (the broker writes them
        elsewhere first), nor one whose first record has no room for it.
        ``encoded``: the batch of a producer that is not idempotent."""
        if encoded is not None:
            return encoded
        if att.sequenced is not None:
            return att.sequenced_batch
        if att.unnumbered is not None:
            return att.unnumbered
        with self._seq_lock:      # taken now: a batch left unnumbered leaves a gap, which is fine
            seq = self._seqs.get(mq, 0)
            self._seqs[mq] = seq + 1
        born, limit = time.time_ns() // 1_000_000, self.config.max_message_bytes
        try:
            data, scheduled = encode_batch(msgs, topic, born, self._host, limit,
                                           sequencing(self.producer_id, seq, len(msgs)))
        except MessageTooLargeError:  # no room for its numbering (or a message too large)
            att.unnumbered = encode_batch(msgs, topic, born, self._host, limit)
            return att.unnumbered
        if scheduled:
            att.unnumbered = data, scheduled
            return att.unnumbered
        att.sequenced, att.pinned = mq, True
        att.sequenced_batch = data, False
        return att.sequenced_batch

    def _release_if_no_failover(self, att, mq: MessageQueue | None, exc: Exception) -> None:
        """An idempotent send that failed on ``mq`` stays there (its retry,
        on the same master or the next one after a failover, is stored once)
        unless its master is gone and the group has no other member to take
        over (a lone master died): then it goes to another group, numbered
        anew, as any send would."""
        if att.sequenced is None or mq is None or att.pinned_by_caller or \
                not isinstance(exc, BrokerUnreachableError | NoRouteError):
            return
        try:
            failed = self.route(mq.topic, wait_s=0).groups.get(mq.broker_group)
            address = failed.address if failed is not None else None
        except DuomqError:
            address = None
        if any(m.address != address for m in self.members.of(mq.broker_group).values()):
            return
        log.info("broker group %s has no member to fail over to: the send moves on",
                 mq.broker_group)
        att.sequenced, att.sequenced_batch, att.pinned = None, None, False

    def _request(self, topic, mq, msgs, encoded, limit: int) -> pb.SendRequest:
        data, scheduled = encoded      # scheduled: the broker holds the delayed ones
        if limit and len(data) + FRAME_ENVELOPE_BYTES > limit:
            raise MessageTooLargeError(
                f"a batch of {len(msgs)} messages is {len(data)} bytes: broker group "
                f"{mq.broker_group!r} reads requests of at most {limit} bytes "
                f"(max_frame_bytes); send fewer at once")
        return pb.SendRequest(topic=topic, queue_id=mq.queue_id, count=len(msgs), records=data,
                              producer_group=self.config.group, scheduled=scheduled)

    def _attempts(self, msgs, timeout_ms, sharding_key, selector, queue, retries):
        timeout_s = (timeout_ms or self.config.send_timeout_ms) / 1000
        topic = msgs[0].topic
        return _SendAttempts(self.config, timeout_s,
                             self.config.retry_times_when_send_failed if retries is None else retries,
                             pinned=queue is not None or sharding_key is not None
                             or selector is not None, faults=self._faults,
                             after_failure=lambda exc, mq: self.after_failure(
                                 exc, topic, mq.broker_group if mq is not None else None))

    def _send(self, msgs, sharding_key, selector, arg, queue, timeout_ms,
              retries: int | None = None) -> Future:
        """The asynchronous send: attempts chained through the I/O thread's
        callbacks; a retry is issued from the retry pool (route look-ups may block)."""
        if self.metrics is not None:
            t0 = time.perf_counter()
            try:
                fut = self._send_chained(msgs, sharding_key, selector, arg, queue, timeout_ms,
                                         retries)
            except Exception as exc:
                self._count_send(msgs, t0, None, exc)
                raise
            fut.add_done_callback(lambda f: self._count_send(
                msgs, t0, None if f.exception() else f.result(), f.exception()))
            return fut
        return self._send_chained(msgs, sharding_key, selector, arg, queue, timeout_ms, retries)

    def _count_send(self, msgs, t0: float, result: SendResult | None,
                    exc: BaseException | None) -> None:
        """A send's time and outcome, for ``metrics_port``."""
        m = self.metrics
        assert m is not None
        topic = msgs[0].topic if msgs else ""
        if isinstance(exc, InvalidNameError) or not isinstance(topic, str) or len(topic) > 200:
            topic = "(invalid)"         # a label holds only names that can exist
        seconds = time.perf_counter() - t0
        if exc is None and result is not None:
            m.observe(("send_cost_time", topic, SUCCESS), seconds)
            m.add(("send_results", topic, result.status.value))
            m.add(("messages_sent", topic), len(msgs))
        else:
            m.observe(("send_cost_time", topic, FAILURE), seconds)
            m.add(("send_results", topic, error_name(exc)))

    def _send_chained(self, msgs, sharding_key, selector, arg, queue, timeout_ms,
                      retries: int | None) -> Future:
        topic, encoded = self._encode(msgs)
        att = self._attempts(msgs, timeout_ms, sharding_key, selector, queue, retries)
        outer: Future = Future()
        outer.set_running_or_notify_cancel()

        seen = [self.routes.version(topic)]

        def attempt():
            mq = None
            seen[0] = self.routes.version(topic)
            try:
                mq, address, timeout_s, limit = self._target(topic, msgs, sharding_key, selector,
                                                             arg, att.sequenced or queue, att)
                sent = self._sequence(msgs, topic, mq, encoded, att)
                inner = self.remoting.request(address, pb.SEND,
                                              self._request(topic, mq, msgs, sent, limit),
                                              timeout_s)
            except Exception as exc:
                return failed(exc, mq)
            inner.add_done_callback(lambda f: finished(f, mq))

        def failed(exc, mq):
            self._release_if_no_failover(att, mq, exc)
            if att.retry_after_error(exc, mq):
                def retry():
                    self._await_master(topic, seen[0], exc, att)
                    attempt()
                self._retries.submit(retry)
                return
            try:
                outer.set_result(att.give_up(exc))
            except Exception as final:
                outer.set_exception(final)

        def finished(f, mq):
            try:
                raw = f.result()
            except Exception as exc:
                return failed(exc, mq)
            try:
                result = att.judge(*raw, mq)
            except Exception as exc:
                return failed(exc, mq)
            if result is None:
                self._retries.submit(attempt)
            else:
                outer.set_result(result)

        attempt()
        return outer

    def _await_master(self, topic: str, seen: int, exc: Exception, att: _SendAttempts) -> None:
        """Before retrying a send whose master died or is gone (or that found
        no master), wait for the topic's route to change after version
        ``seen`` (the election's result), within the send's deadline, unless
        another broker group can take the message now."""
        if not isinstance(exc, BrokerUnreachableError | NoRouteError):
            return
        if not att.pinned:
            groups = set(self.routes.get(topic, wait_s=0).groups)
            if groups - att.avoid - self._faults.avoided(time.monotonic()):
                return
        self.routes.wait_change(topic, seen, att.left_s())

    def leader_changed(self, group: str) -> None:
        self._faults.forgive(group)

    def close(self) -> None:
        self._retries.shutdown(wait=True)
        super().close()
        self._callbacks.shutdown(wait=True)


class _SendAttempts:
    """The retry policy of one send, shared by the blocking and the
    asynchronous paths: which failures are retried, on which groups, until when."""

    def __init__(self, config: ProducerConfig, timeout_s: float, retries: int, pinned: bool,
                 faults: FaultAvoidance,
                 after_failure: Callable[[Exception, MessageQueue | None], bool]):
        self.config = config
        self.faults = faults
        self.after_failure = after_failure   # ClientBase.after_failure: refresh, retriable?
        self.left = retries
        self.pinned = pinned            # a chosen queue or key: never moved to another group
        self.avoid: set[str] = set()    # groups that failed this send
        self.deadline = time.monotonic() + timeout_s
        self.stored: SendResult | None = None   # a stored-but-not-durable earlier answer
        self.sequenced: MessageQueue | None = None  # an idempotent send's queue, once chosen
        self.sequenced_batch = None                 # ... and its numbered batch
        self.unnumbered = None      # an idempotent send's batch that cannot be numbered
        self.pinned_by_caller = pinned

    def left_s(self) -> float:
        return max(0.001, self.deadline - time.monotonic())

    def attempt_s(self, broker_wait_s: float) -> float:
        """One attempt's timeout: the broker's longest ack wait plus a grace,
        so that an attempt lost with a dead broker leaves time to retry."""
        if self.left <= 0:
            return self.left_s()
        return min(self.left_s(), broker_wait_s + ATTEMPT_GRACE_S)

    def _take_retry(self, mq: MessageQueue | None) -> bool:
        if self.left <= 0 or time.monotonic() >= self.deadline:
            return False
        self.left -= 1
        if mq is not None and not self.pinned:
            self.avoid.add(mq.broker_group)
        return True

    def retry_after_error(self, exc: Exception, mq: MessageQueue | None) -> bool:
        retriable = self.after_failure(exc, mq)
        if retriable and mq is not None:
            self.faults.failed(mq.broker_group, time.monotonic())
        if retriable and mq is None and isinstance(exc, NoRouteError) \
                and time.monotonic() < self.deadline:
            return True        # no broker was tried: wait for a master, no attempt spent
        if retriable and self._take_retry(mq):
            log.info("send failed (%s); retrying on another broker group", exc)
            return True
        return False

    def give_up(self, exc: Exception) -> SendResult:
        if self.stored is not None:
            return self.stored          # it was stored earlier, just not durable
        raise exc

    def judge(self, status: int, error: str, resp, mq: MessageQueue) -> SendResult | None:
        """The result of an answer, or None to retry elsewhere; raises for errors."""
        send_status = _STORED.get(status)
        if send_status is None:
            raise for_status(status, error)
        result = SendResult(send_status, "", mq, -1)
        if resp is not None:
            offsets = resp.physical_offsets
            result = SendResult(send_status,
                                make_msg_id(resp.broker_group, offsets[0]) if offsets else "",
                                mq, resp.queue_offset, offsets, resp.broker_group,
                                resp.in_sync_replicas, resp.degraded, resp.epoch,
                                resp.duplicate)
        if (send_status is not SendStatus.SEND_OK and not self.pinned
                and self.config.retry_another_broker_when_not_store_ok and self._take_retry(mq)):
            self.stored = result
            log.info("send stored but %s on %s; retrying on another group", send_status.value,
                     mq.broker_group)
            return None
        return result
