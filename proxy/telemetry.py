"""The ``Telemetry`` stream: a client's settings answered with the server's
(merged: the backoff policy, the largest body, type validation), and the
proxy's view of its clients (by ``x-mq-client-id``: type, language, when
last heard from). Each open stream has an outbox the server's commands go
through (the settings answer now; check-backs and admin commands later)."""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass, field

from duomq.proxy.convert import status
from duomq.proxy.protocol import d, s

log = logging.getLogger("duomq.proxy")

CLIENT_ID = "x-mq-client-id"
SEND_ATTEMPTS = 3                      # RocketMQ 5's producer default
BACKOFF_INITIAL_NS = 10_000_000        # 10 ms, doubling, at most 1 s
BACKOFF_MAX_S = 1
_CLOSED = object()


def client_id(context) -> str:
    for k, v in context.invocation_metadata() or ():
        if k == CLIENT_ID:
            return v
    return ""


# a consumer's retries: RocketMQ's 18 delay levels (1 s ... 2 h) after each failed attempt
RETRY_DELAYS_S = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800,
                  3600, 7200)
RECEIVE_BATCH = 32
LONG_POLLING_S = 20


def merged(given: d.Settings, max_body_bytes: int, max_deliveries: int = 16) -> d.Settings:
    """The server's settings for a client that sent ``given``: a producer's
    retries and largest body; a consumer's retries (``max_deliveries``
    attempts, then the group's dead-letter queue), batch and long polling."""
    out = d.Settings()
    out.CopyFrom(given)
    if given.client_type == d.PRODUCER:
        out.backoff_policy.max_attempts = SEND_ATTEMPTS
        exp = out.backoff_policy.exponential_backoff
        exp.initial.nanos, exp.max.seconds, exp.multiplier = BACKOFF_INITIAL_NS, BACKOFF_MAX_S, 2
        out.publishing.max_body_size = max_body_bytes
        out.publishing.validate_message_type = True
    elif given.client_type in (d.PUSH_CONSUMER, d.SIMPLE_CONSUMER):
        out.backoff_policy.max_attempts = max_deliveries
        for delay in RETRY_DELAYS_S[:max(max_deliveries - 1, 1)]:
            out.backoff_policy.customized_backoff.next.add(seconds=delay)
        sub = out.subscription
        sub.receive_batch_size = sub.receive_batch_size or RECEIVE_BATCH
        if not sub.long_polling_timeout.seconds:
            sub.long_polling_timeout.seconds = LONG_POLLING_S
    return out


@dataclass
class Session:
    client_id: str
    client_type: int = d.CLIENT_TYPE_UNSPECIFIED
    language: int = 0
    version: str = ""
    hostname: str = ""
    topics: frozenset = frozenset()        # a producer's: what it publishes
    last_seen: float = field(default_factory=time.monotonic)
    outbox: queue.Queue = field(default_factory=queue.Queue, repr=False)


class Telemetry:
    def __init__(self, max_body_bytes: int, metrics=None):
        self.max_body_bytes = max_body_bytes
        self.metrics = metrics
        self.sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    def seen(self, context, client_type: int = d.CLIENT_TYPE_UNSPECIFIED) -> Session:
        cid = client_id(context)
        with self._lock:
            sess = self.sessions.get(cid)
            if sess is None:
                sess = self.sessions[cid] = Session(cid)
        sess.last_seen = time.monotonic()
        if client_type:
            sess.client_type = client_type
        return sess

    def snapshot(self) -> list[Session]:
        with self._lock:
            return list(self.sessions.values())

    def publishers(self, topic: str) -> list[Session]:
        """The producer clients with a stream open here that publish ``topic``."""
        with self._lock:
            return [x for x in self.sessions.values()
                    if x.client_type == d.PRODUCER and topic in x.topics]

    def gone(self, context) -> None:
        """A client said it terminates: forgotten (its stream is the client's
        to close: a stream the server ends is an error to the client)."""
        with self._lock:
            self.sessions.pop(client_id(context), None)

    def stream(self, requests, context):
        """The server side of one Telemetry stream: what the client sends is
        read on a thread of its own; what the server has to say is yielded."""
        if not client_id(context):
            yield s.TelemetryCommand(status=status(d.CLIENT_ID_REQUIRED,
                                                   f"Telemetry needs the {CLIENT_ID} header"))
            return
        sess = self.seen(context)
        reader = threading.Thread(target=self._read, args=(requests, sess),
                                  name=f"duomq-telemetry-{sess.client_id}", daemon=True)
        reader.start()
        if self.metrics is not None:
            self.metrics.stream(1)
        try:
            while context.is_active():
                try:
                    cmd = sess.outbox.get(timeout=1.0)
                except queue.Empty:
                    continue
                if cmd is _CLOSED:             # the proxy stops
                    return
                yield cmd
        finally:
            if self.metrics is not None:
                self.metrics.stream(-1)
            with self._lock:
                if self.sessions.get(sess.client_id) is sess and not context.is_active():
                    del self.sessions[sess.client_id]

    def close(self) -> None:
        """The proxy stops: every stream ends."""
        with self._lock:
            sessions = list(self.sessions.values())
        for sess in sessions:
            sess.outbox.put(_CLOSED)

    def _read(self, requests, sess: Session) -> None:
        try:
            for cmd in requests:
                sess.last_seen = time.monotonic()
                sess.outbox.put(self.answer(cmd, sess))
        except Exception as exc:          # the stream ended or broke: nothing to answer
            log.debug("telemetry of %s ended: %s", sess.client_id, exc)

    def answer(self, cmd: s.TelemetryCommand, sess: Session) -> s.TelemetryCommand:
        """What the server says to one command a client sent."""
        kind = cmd.WhichOneof("command")
        if kind == "settings":
            st = cmd.settings
            sess.client_type, sess.language = st.client_type, st.user_agent.language
            sess.version, sess.hostname = st.user_agent.version, st.user_agent.hostname
            sess.topics = frozenset(t.name for t in st.publishing.topics)
            return s.TelemetryCommand(status=status(d.OK),
                                      settings=merged(st, self.max_body_bytes))
        if kind is None:
            return s.TelemetryCommand(status=status(d.BAD_REQUEST,
                                                    "a Telemetry command with nothing in it"))
        return s.TelemetryCommand(status=status(d.NOT_IMPLEMENTED,
                                                f"duomq proxy does not take {kind} yet"))
