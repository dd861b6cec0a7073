"""Receiving through the proxy: ``ReceiveMessage``, ``AckMessage`` and
``ChangeInvisibleDuration`` on duomq's share consumption (the official
SimpleConsumer and PushConsumer both POP). One duomq SimpleConsumer per
consumer group serves every client of the group on this proxy, each POP
and ack made in the client's own name (its ``x-mq-client-id``): a receipt
holds for the client that received it, through any proxy."""

from __future__ import annotations

import threading
import time

from duomq.client.consumer.simple import RECEIPTS_PER_ACK, SimpleConsumer
from duomq.common.errors import DuomqError
from duomq.proto import pb
from duomq.proxy import convert, receipts
from duomq.proxy.convert import status
from duomq.proxy.protocol import d, s
from duomq.proxy.telemetry import client_id

DEFAULT_BATCH = 32
MAX_BATCH = 1024
MAX_WAIT_MS = 30_000           # a held receive at most (the client waits its own timeout on top)
MIN_INVISIBLE_MS, MAX_INVISIBLE_MS = 100, 12 * 3600 * 1000


def duration_ms(dur) -> int:
    return dur.seconds * 1000 + dur.nanos // 1_000_000


def expression_of(fe) -> str:
    """A filter expression as duomq's subscription (ConvertError: SQL92)."""
    if fe.type == d.SQL:
        raise convert.ConvertError(d.ILLEGAL_FILTER_EXPRESSION,
                                   "SQL92 filters are not supported: filter by tag")
    return fe.expression.strip() or "*"


class Consuming:
    def __init__(self, producer, consume_from: str = "first"):
        self.producer = producer            # its ZooKeeper session is shared
        self.consume_from = consume_from
        self._groups: dict[str, SimpleConsumer] = {}
        self._lock = threading.Lock()

    def consumer(self, group: str, topic: str) -> SimpleConsumer:
        with self._lock:
            c = self._groups.get(group)
            if c is None:
                c = self._groups[group] = SimpleConsumer(
                    group, subscriptions={topic: "*"}, zookeeper=self.producer.zookeeper,
                    cluster=self.producer.cluster, zk=self.producer.zk,
                    consume_from=self.consume_from)
            return c

    def close(self) -> None:
        with self._lock:
            groups, self._groups = list(self._groups.values()), {}
        for c in groups:
            c.close()

    # ------------------------------------------------------------ ReceiveMessage
    def receive(self, request, context):
        """The messages of one POP, then the status (MESSAGE_NOT_FOUND: none)."""
        try:
            got = self._receive(request, context)
        except convert.ConvertError as exc:
            yield s.ReceiveMessageResponse(status=status(exc.code, str(exc)))
            return
        except DuomqError as exc:
            yield s.ReceiveMessageResponse(status=status(convert.error_code(exc), str(exc)))
            return
        if not got:
            yield s.ReceiveMessageResponse(status=status(d.MESSAGE_NOT_FOUND, "no new message"))
            return
        now = s.ReceiveMessageResponse()
        convert.set_timestamp(now.delivery_timestamp, int(time.time() * 1000))
        yield now
        for m in got:
            handle = receipts.Receipt(m.broker_group, m.queue_id, m.queue_offset,
                                      m.delivery_count, m.receipt_key).handle()
            yield s.ReceiveMessageResponse(message=convert.incoming(m, handle))
        yield s.ReceiveMessageResponse(status=status(d.OK))

    def _receive(self, request, context) -> list:
        cid, group = client_id(context), request.group.name
        if not cid:
            raise convert.ConvertError(d.CLIENT_ID_REQUIRED, "ReceiveMessage needs the "
                                                             "x-mq-client-id header")
        if not group:
            raise convert.ConvertError(d.ILLEGAL_CONSUMER_GROUP, "ReceiveMessage names no group")
        mq = request.message_queue
        topic, broker = mq.topic.name, mq.broker.name
        if not topic:
            raise convert.ConvertError(d.ILLEGAL_TOPIC, "ReceiveMessage names no topic")
        batch = request.batch_size or DEFAULT_BATCH
        if not 1 <= batch <= MAX_BATCH:
            raise convert.ConvertError(d.BAD_REQUEST, f"batch_size {batch}: 1 to {MAX_BATCH}")
        invisible = duration_ms(request.invisible_duration) if \
            request.HasField("invisible_duration") else 30_000
        if not MIN_INVISIBLE_MS <= invisible <= MAX_INVISIBLE_MS:
            raise convert.ConvertError(d.ILLEGAL_INVISIBLE_TIME,
                                       f"invisible duration {invisible} ms: 100 ms to 12 h")
        wait = min(max(duration_ms(request.long_polling_timeout), 0), MAX_WAIT_MS)
        expression = expression_of(request.filter_expression)
        c = self.consumer(group, topic)
        groups = c.route(topic).groups
        if not groups:
            raise convert.ConvertError(d.TOPIC_NOT_FOUND, f"topic {topic!r} does not exist")
        if broker not in groups:           # a queue of a group that left: any group serves
            broker = sorted(groups)[0]
        return c.pop(topic, broker, batch, wait, expression=expression, invisible_ms=invisible,
                     client_id=cid)

    # ------------------------------------------------------------ acks
    def ack(self, request, context) -> s.AckMessageResponse:
        entries = [s.AckMessageResultEntry(message_id=e.message_id, receipt_handle=e.receipt_handle)
                   for e in request.entries]
        if not request.entries:
            return s.AckMessageResponse(status=status(d.BAD_REQUEST, "AckMessage holds no entry"))
        changed = self._change(request, context, [e.receipt_handle for e in request.entries],
                               pb.ACCEPT, 0)
        for entry, st in zip(entries, changed, strict=True):
            entry.status.CopyFrom(st)
        return s.AckMessageResponse(status=_overall(changed), entries=entries)

    def change_invisible(self, request, context) -> s.ChangeInvisibleDurationResponse:
        ms = duration_ms(request.invisible_duration)
        if not MIN_INVISIBLE_MS <= ms <= MAX_INVISIBLE_MS:
            return s.ChangeInvisibleDurationResponse(status=status(
                d.ILLEGAL_INVISIBLE_TIME, f"invisible duration {ms} ms: 100 ms to 12 h"))
        st = self._change(request, context, [request.receipt_handle], pb.RENEW, ms)[0]
        return s.ChangeInvisibleDurationResponse(
            status=st, receipt_handle=request.receipt_handle if st.code == d.OK else "")

    def _change(self, request, context, handles: list[str], action, ms: int) -> list:
        """Each handle's status once ``action`` was asked of its master."""
        cid, group, topic = client_id(context), request.group.name, request.topic.name
        if not cid or not group or not topic:
            what = "the x-mq-client-id header" if not cid else "a group" if not group else \
                "a topic"
            return [status(d.BAD_REQUEST, f"an ack needs {what}")] * len(handles)
        out: list = [None] * len(handles)
        by_group: dict[str, list[tuple[int, receipts.Receipt]]] = {}
        for i, h in enumerate(handles):
            try:
                r = receipts.parse(h)
            except receipts.BadReceipt as exc:
                out[i] = status(d.INVALID_RECEIPT_HANDLE, str(exc))
                continue
            by_group.setdefault(r.broker_group, []).append((i, r))
        c = self.consumer(group, topic)
        for broker, items in by_group.items():
            for k in range(0, len(items), RECEIPTS_PER_ACK):
                part = items[k:k + RECEIPTS_PER_ACK]
                try:
                    resp = c.share_ack(broker, topic, [r.share_receipt for _, r in part],
                                       action, ms, client_id=cid)
                except DuomqError as exc:
                    for i, _ in part:
                        out[i] = status(convert.error_code(exc), str(exc))
                    continue
                for (i, _), st, why in zip(part, resp.statuses, resp.errors, strict=True):
                    out[i] = status(d.OK) if st == pb.OK else status(d.INVALID_RECEIPT_HANDLE,
                                                                     why or "expired")
        return out


def _overall(statuses: list) -> d.Status:
    codes = {st.code for st in statuses}
    if len(codes) == 1:
        return statuses[0]
    return status(d.MULTIPLE_RESULTS, "entries differ")
