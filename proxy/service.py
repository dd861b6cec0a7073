"""``apache.rocketmq.v2.MessagingService``, answered through duomq's client
library: routes from the cluster's ZooKeeper, sends through one duomq
Producer shared by every client of this proxy (idempotent: a retry of the
proxy's own does not store twice). An RPC not served yet answers
NOT_IMPLEMENTED naming itself; none raises into gRPC (an unexpected error
is INTERNAL_SERVER_ERROR with its reason, logged)."""

from __future__ import annotations

import functools
import logging
import time

from duomq.client import Producer
from duomq.common.errors import DuomqError
from duomq.proxy import convert, routes
from duomq.proxy.consume import Consuming
from duomq.proxy.convert import status
from duomq.proxy.metrics import ProxyMetrics
from duomq.proxy.offsets import Offsets
from duomq.proxy.protocol import d, rpc, s
from duomq.proxy.telemetry import Telemetry
from duomq.proxy.transactions import Transactions, half_properties, transaction_id

log = logging.getLogger("duomq.proxy")

ROUTE_WAIT_S = 1.0            # a first answer for a topic's route


def _guarded(response_type):
    """A unary RPC that answers ``response_type(status=...)`` on any error,
    counted in the metrics by its status code."""
    def wrap(fn):
        @functools.wraps(fn)
        def call(self, request, context):
            t0 = time.perf_counter()
            try:
                out = fn(self, request, context)
            except Exception as exc:              # never into gRPC: a status, logged
                log.exception("%s failed", fn.__name__)
                out = response_type(status=status(convert.error_code(exc),
                                                  f"{fn.__name__}: {exc}"))
            self.metrics.done(fn.__name__, out.status.code, time.perf_counter() - t0)
            return out
        return call
    return wrap


def _streamed(response_type):
    """A server-streaming RPC: its responses, a status last whatever goes
    wrong, counted by the last status it gave."""
    def wrap(fn):
        @functools.wraps(fn)
        def call(self, request, context):
            t0, code = time.perf_counter(), d.OK
            try:
                for r in fn(self, request, context):
                    if r.HasField("status"):
                        code = r.status.code
                    yield r
            except Exception as exc:              # never into gRPC: a status, logged
                if not isinstance(exc, (convert.ConvertError, DuomqError)):
                    log.exception("%s failed", fn.__name__)
                code = convert.error_code(exc)
                yield response_type(status=status(code, f"{fn.__name__}: {exc}"))
            finally:
                self.metrics.done(fn.__name__, code, time.perf_counter() - t0)
        return call
    return wrap


class MessagingService(rpc.MessagingServiceServicer):
    def __init__(self, producer: Producer, own: tuple[str, int], max_body_bytes: int):
        self.producer = producer
        self.own = own                     # (host, port) to name when a client names none
        self.metrics = ProxyMetrics()
        self.telemetry = Telemetry(max_body_bytes, self.metrics)
        self.consuming = Consuming(producer)
        self.transactions = Transactions(producer, self.telemetry)
        self.offsets = Offsets(producer)

    # ------------------------------------------------------------ routes, clients
    @_guarded(s.QueryRouteResponse)
    def QueryRoute(self, request, context):
        topic = request.topic.name
        if not topic:
            return s.QueryRouteResponse(status=status(d.ILLEGAL_TOPIC, "QueryRoute names no "
                                                                      "topic"))
        route = self.producer.routes.get(topic, ROUTE_WAIT_S)
        if not route.groups:
            return s.QueryRouteResponse(status=status(
                d.TOPIC_NOT_FOUND, f"topic {topic!r} does not exist in cluster "
                                   f"{self.producer.cluster!r} (duomq topic create {topic})"))
        where = routes.endpoints(request.endpoints if request.HasField("endpoints") else None,
                                 self.own)
        queues = routes.message_queues(topic, request.topic.resource_namespace, route.groups,
                                       where)
        return s.QueryRouteResponse(status=status(d.OK), message_queues=queues)

    @_guarded(s.HeartbeatResponse)
    def Heartbeat(self, request, context):
        self.telemetry.seen(context, request.client_type)
        return s.HeartbeatResponse(status=status(d.OK))

    @_guarded(s.NotifyClientTerminationResponse)
    def NotifyClientTermination(self, request, context):
        self.telemetry.gone(context)
        return s.NotifyClientTerminationResponse(status=status(d.OK))

    def Telemetry(self, request_iterator, context):
        return self.telemetry.stream(request_iterator, context)

    # ------------------------------------------------------------ sending
    @_guarded(s.SendMessageResponse)
    def SendMessage(self, request, context):
        if not request.messages:
            return s.SendMessageResponse(status=status(d.BAD_REQUEST, "SendMessage holds no "
                                                                      "message"))
        try:
            outs = [convert.outgoing(m) for m in request.messages]
        except convert.ConvertError as exc:
            return s.SendMessageResponse(status=status(exc.code, str(exc)))
        if len({o.message.topic for o in outs}) > 1:
            return s.SendMessageResponse(status=status(
                d.BAD_REQUEST, "the messages of one SendMessage must share a topic"))
        entries: list[s.SendResultEntry] = []
        for batch in _one_group_each(outs):
            entries.extend(self._send(batch))
        codes = {e.status.code for e in entries}
        top = entries[0].status if len(codes) == 1 else status(d.MULTIPLE_RESULTS,
                                                               "entries differ")
        return s.SendMessageResponse(status=top, entries=entries)

    def _send(self, batch: list[convert.Outgoing]) -> list[s.SendResultEntry]:
        if batch[0].kind == d.TRANSACTION:     # a half message each: a transaction each
            return [e for o in batch for e in self._send_half(o)]
        try:
            r = self.producer.send_batch([o.message for o in batch],
                                         sharding_key=batch[0].group or None)
        except Exception as exc:
            st = status(convert.error_code(exc), str(exc))
            return [s.SendResultEntry(status=st, message_id=o.message_id) for o in batch]
        return _entries(batch, r)

    def _send_half(self, o: convert.Outgoing) -> list[s.SendResultEntry]:
        o.message.properties = half_properties(o.message.properties)
        try:
            r = self.producer.send(o.message)
        except Exception as exc:
            return [s.SendResultEntry(status=status(convert.error_code(exc), str(exc)),
                                      message_id=o.message_id)]
        return _entries([o], r, transaction_id(r))

    @_guarded(s.EndTransactionResponse)
    def EndTransaction(self, request, context):
        return self.transactions.end(request, context)

    # ------------------------------------------------------------ offsets: offsets.py
    @_streamed(s.PullMessageResponse)
    def PullMessage(self, request, context):
        return self.offsets.pull(request)

    @_guarded(s.UpdateOffsetResponse)
    def UpdateOffset(self, request, context):
        return self.offsets.update(request)

    @_guarded(s.GetOffsetResponse)
    def GetOffset(self, request, context):
        return self.offsets.get(request)

    @_guarded(s.QueryOffsetResponse)
    def QueryOffset(self, request, context):
        return self.offsets.query(request)

    # ------------------------------------------------------------ receiving: consume.py

    # ------------------------------------------------------------ not served yet
    def _not_yet(self, name: str, response_type):
        return response_type(status=status(d.NOT_IMPLEMENTED,
                                           f"duomq proxy does not serve {name} yet"))

    @_guarded(s.QueryAssignmentResponse)
    def QueryAssignment(self, request, context):
        """A PushConsumer's queues: one a broker group (every queue of it:
        the group's POP serves them all), served at this proxy."""
        topic = request.topic.name
        if not topic or not request.group.name:
            return s.QueryAssignmentResponse(status=status(
                d.BAD_REQUEST, "QueryAssignment needs a topic and a group"))
        route = self.producer.routes.get(topic, ROUTE_WAIT_S)
        if not route.groups:
            return s.QueryAssignmentResponse(status=status(
                d.TOPIC_NOT_FOUND, f"topic {topic!r} does not exist"))
        where = routes.endpoints(request.endpoints if request.HasField("endpoints") else None,
                                 self.own)
        queues = routes.assignments(topic, request.topic.resource_namespace, route.groups, where)
        return s.QueryAssignmentResponse(status=status(d.OK),
                                         assignments=[d.Assignment(message_queue=q)
                                                      for q in queues])

    @_streamed(s.ReceiveMessageResponse)
    def ReceiveMessage(self, request, context):
        return self.consuming.receive(request, context)

    @_guarded(s.AckMessageResponse)
    def AckMessage(self, request, context):
        return self.consuming.ack(request, context)

    @_guarded(s.ForwardMessageToDeadLetterQueueResponse)
    def ForwardMessageToDeadLetterQueue(self, request, context):
        return self._not_yet("ForwardMessageToDeadLetterQueue",
                             s.ForwardMessageToDeadLetterQueueResponse)

    @_guarded(s.ChangeInvisibleDurationResponse)
    def ChangeInvisibleDuration(self, request, context):
        return self.consuming.change_invisible(request, context)

    @_guarded(s.RecallMessageResponse)
    def RecallMessage(self, request, context):
        if not request.topic.name or not request.recall_handle:
            return s.RecallMessageResponse(status=status(
                d.BAD_REQUEST, "RecallMessage needs a topic and a recall handle"))
        try:
            msg_id = self.producer.recall(request.topic.name, request.recall_handle)
        except Exception as exc:
            return s.RecallMessageResponse(status=status(convert.error_code(exc), str(exc)))
        return s.RecallMessageResponse(status=status(d.OK), message_id=msg_id)

    @_guarded(s.SyncLiteSubscriptionResponse)
    def SyncLiteSubscription(self, request, context):
        return self._not_yet("SyncLiteSubscription", s.SyncLiteSubscriptionResponse)


def _entries(batch: list[convert.Outgoing], r, tid: str = "") -> list[s.SendResultEntry]:
    """Each message's entry of one store's SendResult ``r``."""
    code = convert.SEND_CODES.get(r.status.value, d.INTERNAL_SERVER_ERROR)
    st = status(code, "OK" if code == d.OK else f"stored, but {r.status.value}")
    ids = r.msg_ids
    return [s.SendResultEntry(status=st, message_id=o.message_id or ids[i],
                              offset=r.queue_offset + i if r.queue_offset >= 0 else 0,
                              recall_handle=r.recall_handle if i == 0 else "",
                              transaction_id=tid)
            for i, o in enumerate(batch)]


def _one_group_each(outs: list[convert.Outgoing]) -> list[list[convert.Outgoing]]:
    """The messages in runs that go to one queue: all of them, unless FIFO
    messages of different message groups are among them (each group's run
    to its own queue, in order), or transactional ones (a transaction each)."""
    runs: list[list[convert.Outgoing]] = []
    for o in outs:
        if runs and runs[-1][0].group == o.group and \
                (runs[-1][0].kind == d.TRANSACTION) == (o.kind == d.TRANSACTION):
            runs[-1].append(o)
        else:
            runs.append([o])
    return runs
