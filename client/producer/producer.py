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

import copy
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from duomq.client.backoff import RefusalBackoff
from duomq.client.base import ClientBase
from duomq.client.metrics import FAILURE, SUCCESS, error_name
from duomq.client.producer.selector import FaultAvoidance, RoundRobinSelector, select_by_key
from duomq.client.producer.send_attempts import (  # noqa: F401  (re-exported)
    SendAttempts,
    SendResult,
    SendStatus,
)
from duomq.client.shape import check_shape
from duomq.common import recall_handle
from duomq.common.client_config import ProducerConfig
from duomq.common.config import FRAME_ENVELOPE_BYTES
from duomq.common.delay import DELIVER_AT, SCHEDULING
from duomq.common.errors import (
    BadRequestError,
    BrokerUnreachableError,
    ConfigError,
    DuomqError,
    InvalidNameError,
    MessageTooLargeError,
    NoRouteError,
    NotMasterError,
    RequestTimeoutError,
    ServiceNotAvailableError,
    for_status,
)
from duomq.common.idempotence import SEQUENCING, sequencing
from duomq.common.message import Message, MessageQueue, parse_msg_id
from duomq.common.names import validate_name
from duomq.common.transaction import TRANSACTION
from duomq.format import native
from duomq.format import record as rec
from duomq.proto import pb
from duomq.proto.wire import SendAsk

log = logging.getLogger(__name__)


Selector = Callable[[list[MessageQueue], Message, object], MessageQueue]
BATCH_MAX_BYTES = 4 << 20   # tools that batch (the CLI, the Spark sink) send at most about this
                            # much per request: well below a broker's max_frame_bytes
_BORN = rec.fields("born_ts_ms")
BROKER_ROUTED = frozenset(SCHEDULING | {TRANSACTION})   # properties that send a message elsewhere first
_NOTHING_ROUTED: frozenset[str] = frozenset()


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
    done = _encode(msgs, topic, born_ts_ms, host, max_message_bytes, BROKER_ROUTED, flags)
    if done is not None:
        return done, False
    done = _routed(given, topic, born_ts_ms, host, max_message_bytes)
    if done is not None:
        return done, True
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
        props = m.wire_properties() if m.deliver_at_ms else m.properties
        if props:
            if not scheduled:
                scheduled = not BROKER_ROUTED.isdisjoint(props)
            r = rec.encode_record(topic_b, m.tags.encode() if m.tags else b"",
                                  m.keys.encode() if m.keys else b"",
                                  rec.encode_properties(props), body, born_ts_ms, host, flags)
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


def _routed(msgs: Sequence[Message], topic: str, born_ts_ms: int, host: bytes,
            max_message_bytes: int) -> bytes | None:
    """A batch the broker routes (timers, delays, halves), encoded in the C
    loop as plain records with properties, never numbered; None: not such a
    batch, or the loop does not take it."""
    if any(m.deliver_at_ms or (m.properties and not BROKER_ROUTED.isdisjoint(m.properties))
           for m in msgs):
        return _encode(msgs, topic, born_ts_ms, host, max_message_bytes, _NOTHING_ROUTED, 0)
    return None


def encode_numbered(msgs: Sequence[Message], topic: str, born_ts_ms: int, host: bytes,
                    max_message_bytes: int, pid: int, seq: int) -> tuple[bytes, bool]:
    """``encode_batch`` of an idempotent producer's batch numbered ``(pid,
    seq, len(msgs))``: in one C call when the C loops take it (the numbering
    written after the first message's properties, with no numbering dict
    and no copy of that message: issue 41's lean send), else
    ``encode_batch``'s own path, which decides the rest (a delay, a
    transaction, a name of the numbering's own, a record too large)."""
    done = _encode(msgs, topic, born_ts_ms, host, max_message_bytes, BROKER_ROUTED,
                   rec.FLAG_SEQUENCED, SEQUENCING, pid, seq, len(msgs))
    if done is not None:
        return done, False
    routed = _routed(msgs, topic, born_ts_ms, host, max_message_bytes)   # (never numbered)
    if routed is not None:
        return routed, True
    return encode_batch(msgs, topic, born_ts_ms, host, max_message_bytes,
                        sequencing(pid, seq, len(msgs)))


def _numbered(msgs: Sequence[Message],
              numbering: dict[str, str] | None) -> tuple[Sequence[Message], int]:
    """The batch with ``numbering`` in its first message's properties (a
    copy: the caller's message is left as it is), and the first record's flags."""
    if numbering is None:
        return msgs, 0
    first = copy.copy(msgs[0])
    first.properties = {**first.properties, **numbering}
    return [first, *msgs[1:]], rec.FLAG_SEQUENCED


def _local_host() -> bytes:
    try:
        ip = socket.gethostbyname(socket.gethostname())
    except OSError:
        ip = "127.0.0.1"
    return rec.pack_host(ip, os.getpid())


class Producer(ClientBase):
    def __init__(self, group: str = "DEFAULT_PRODUCER", *old: Any, zookeeper: str | None = None,
                 cluster: str | None = None, config: ProducerConfig | None = None,
                 zk=None, **overrides):
        check_shape(type(self).__name__, group, old)
        cfg = config or ProducerConfig(group=group, **overrides)
        self.config = cfg
        self._callbacks = ThreadPoolExecutor(1, thread_name_prefix="duomq-send-callback")
        self._retries = ThreadPoolExecutor(2, thread_name_prefix="duomq-send-retry")
        self._rr = RoundRobinSelector()
        self._checked: set[tuple[str, object]] = set()
        self._checked_routes: dict[str, object] = {}   # topic -> the route snapshot checked
        self._faults = FaultAvoidance(cfg.fault_avoidance_ms / 1000)
        self._backoff = RefusalBackoff()
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
                    self._await_master(topic, seen, exc, att, mq)
                    continue
                return att.give_up(exc)
            if result is not None:
                if self._backoff.waiting():
                    self._backoff.stored(mq.broker_group)
                result.deliver_at_ms = _timer_at(msgs[0])
                return result

    def recall(self, topic: str, handle: str, timeout_ms: int | None = None) -> str:
        """Cancel a timer message of ``topic`` that has not come due, by
        the handle its send gave (``SendResult.recall_handle``); returns its
        message id. A recall after it came due, of a handle that is garbage,
        of another topic's or recalled before, raises BadRequestError and
        changes nothing. Acked as a send is (replicated: a failover does not
        bring the timer back)."""
        of_topic, msg_id, _at = recall_handle.parse(handle)
        if of_topic != topic:
            raise BadRequestError(f"the recall handle is of topic {of_topic!r}, not {topic!r}: "
                                  f"nothing recalled")
        group = parse_msg_id(msg_id)[0]
        deadline = time.monotonic() + (timeout_ms or self.config.send_timeout_ms) / 1000
        req = pb.RecallRequest(topic=topic, handle=handle)
        while True:
            try:
                status, error, _resp = self.remoting.call(
                    self.master_address(group, topic), pb.RECALL, req,
                    max(0.05, deadline - time.monotonic()))
                if status == pb.SLAVE_NOT_AVAILABLE:     # stored on a master alone, as a send
                    log.warning("recall of %s stored, not confirmed by a slave: %s", msg_id,
                                error)
                if status in (pb.OK, pb.SLAVE_NOT_AVAILABLE):
                    return msg_id
                raise for_status(status, error)
            except DuomqError as exc:
                if not exc.retriable or time.monotonic() + 0.2 >= deadline:
                    raise
                log.info("recalling %s: %s; trying again", msg_id, exc)
                self.after_failure(exc, topic, group)
                time.sleep(0.2)

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
        if self._checked_routes.get(topic) is not route:   # once per route snapshot
            for g in route.groups.values():
                key = (g.group, g.max_ack_wait_ms)
                if key not in self._checked:       # once per broker setting, not per send
                    self.config.check_broker(g.group, g.max_ack_wait_ms)
                    self._checked.add(key)
            self._checked_routes[topic] = route
        mq = queue
        if mq is None:
            queues, slow = route.writable_queues()
            if not queues:
                raise DuomqError(f"topic {topic!r} has no writable queue")
            if selector is not None:
                mq = selector(list(queues), msgs[0], arg)
            elif sharding_key is not None:
                mq = select_by_key(queues, sharding_key)
            else:
                # a group whose master cannot ack now (SYNC, too few slaves) is
                # avoided while another can take the message
                avoid = self._faults.avoided(time.monotonic())
                if att.avoid:
                    avoid = att.avoid | avoid
                mq = self._rr.select(queues, avoid | slow if slow else avoid)
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
            data, scheduled = encode_numbered(msgs, topic, born, self._host, limit,
                                              self.producer_id, seq)
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
        on the same master or the next one after a failover, is stored once).
        It moves to another group, numbered anew, only when the producer
        knows no attempt was stored (every answer so far a refusal) and the
        group has no member to take over (a lone master died). A timeout
        leaves the outcome unknown: the send then never moves, and fails at
        its deadline rather than risk a second copy on another queue; a group
        that looks empty for a moment (brokers re-registering after a
        ZooKeeper session expiry) is not knowledge that nothing was stored."""
        if isinstance(exc, RequestTimeoutError) and getattr(exc, "sent", True):
            att.maybe_stored = True          # (a request that never left stored nothing)
        if att.sequenced is None or mq is None or att.pinned_by_caller or att.maybe_stored \
                or not isinstance(exc, BrokerUnreachableError | NoRouteError):
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

    def _request(self, topic, mq, msgs, encoded, limit: int) -> SendAsk:
        data, scheduled = encoded      # scheduled: the broker holds the delayed ones
        if limit and len(data) + FRAME_ENVELOPE_BYTES > limit:
            raise MessageTooLargeError(
                f"a batch of {len(msgs)} messages is {len(data)} bytes: broker group "
                f"{mq.broker_group!r} reads requests of at most {limit} bytes "
                f"(max_frame_bytes); send fewer at once")
        return SendAsk(topic, mq.queue_id, len(msgs), data, self.config.group, scheduled)

    def _attempts(self, msgs, timeout_ms, sharding_key, selector, queue, retries):
        timeout_s = (timeout_ms or self.config.send_timeout_ms) / 1000
        topic = msgs[0].topic
        return SendAttempts(self.config, timeout_s,
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
                    self._await_master(topic, seen[0], exc, att, mq)
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
                if self._backoff.waiting():
                    self._backoff.stored(mq.broker_group)
                outer.set_result(result)

        attempt()
        return outer

    def _await_master(self, topic: str, seen: int, exc: Exception, att: SendAttempts,
                      mq: MessageQueue | None) -> None:
        """Before retrying a send whose master died or is gone (or that found
        no master), wait for the topic's route to change after version
        ``seen`` (the election's result), within the send's deadline, unless
        another broker group can take the message now. A master that refused
        the write (fenced, handing over, full; or a slave) is retried after
        the group's backoff (``RefusalBackoff``), sooner when the route changes."""
        group = mq.broker_group if mq is not None else None
        refused = isinstance(exc, ServiceNotAvailableError | NotMasterError) and group is not None
        if refused and group is not None:
            self._backoff.refused(group)
        elif not isinstance(exc, BrokerUnreachableError | NoRouteError):
            return
        if not att.pinned:
            groups = set(self.routes.get(topic, wait_s=0).groups)
            if groups - att.avoid - self._faults.avoided(time.monotonic()):
                return
        if refused and group is not None:
            wait = self._backoff.turn(group, time.monotonic())
            if wait > 0:
                self.routes.wait_change(topic, seen, min(wait, att.left_s()))
            return
        self.routes.wait_change(topic, seen, att.left_s())

    def leader_changed(self, group: str) -> None:
        self._faults.forgive(group)

    def close(self) -> None:
        self._retries.shutdown(wait=True)
        super().close()
        self._callbacks.shutdown(wait=True)


_encode: Any = native.declined     # bound by _bind: the C loops' encode, or declining all


@native.chosen
def _bind(loops: Any) -> None:
    global _encode
    _encode = loops.encode if loops is not None else native.declined


def _timer_at(msg: Message) -> int:
    """A timer message's delivery time, if it is ahead (0: none, or past:
    delivered at once, nothing to recall)."""
    at = msg.deliver_at_ms or int(msg.properties.get(DELIVER_AT) or 0)
    return at if at > time.time() * 1000 else 0
