"""Queue offsets through the proxy: ``PullMessage``, ``UpdateOffset``,
``GetOffset`` and ``QueryOffset`` on duomq's queues and committed offsets
(RocketMQ 5's own proxy answers them UNIMPLEMENTED; autoscalers such as
KEDA read a group's lag with them). One duomq PullConsumer per consumer
group serves them, sharing the proxy's ZooKeeper session."""

from __future__ import annotations

import threading

from duomq.client import PullConsumer
from duomq.common.errors import DuomqError
from duomq.common.message import MessageQueue, PullStatus
from duomq.common.names import validate_name
from duomq.proxy import convert
from duomq.proxy.consume import MAX_BATCH, MAX_WAIT_MS, duration_ms, expression_of
from duomq.proxy.convert import status
from duomq.proxy.protocol import d, s

ANY_GROUP = "PROXY_OFFSETS"          # QueryOffset names no group: the queue's bounds only
DEFAULT_PULL = 32


def queue_of(pmq) -> MessageQueue:
    """The protocol's queue as duomq's (ConvertError: not a queue)."""
    try:
        validate_name("topic", pmq.topic.name)
        validate_name("broker group", pmq.broker.name)
    except DuomqError as exc:
        raise convert.ConvertError(d.BAD_REQUEST, f"not a queue: {exc}") from None
    if pmq.id < 0:
        raise convert.ConvertError(d.BAD_REQUEST, f"queue id {pmq.id}: a queue of its own")
    return MessageQueue(pmq.topic.name, pmq.broker.name, pmq.id)


class Offsets:
    def __init__(self, producer):
        self.producer = producer
        self._groups: dict[str, PullConsumer] = {}
        self._lock = threading.Lock()

    def consumer(self, group: str) -> PullConsumer:
        with self._lock:
            c = self._groups.get(group)
            if c is None:
                c = self._groups[group] = PullConsumer(
                    group, zookeeper=self.producer.zookeeper, cluster=self.producer.cluster,
                    zk=self.producer.zk)
            return c

    def close(self) -> None:
        with self._lock:
            groups, self._groups = list(self._groups.values()), {}
        for c in groups:
            c.close()

    def _group(self, request) -> str:
        if not request.group.name:
            raise convert.ConvertError(d.ILLEGAL_CONSUMER_GROUP, "the request names no group")
        return request.group.name

    def query(self, request) -> s.QueryOffsetResponse:
        mq = queue_of(request.message_queue)
        c = self.consumer(ANY_GROUP)
        policy = request.query_offset_policy
        if policy == d.BEGINNING:
            offset = c.min_offset(mq)
        elif policy == d.END:
            offset = c.max_offset(mq)
        else:
            offset = c.offset_by_time(mq, request.timestamp.seconds * 1000
                                      + request.timestamp.nanos // 1_000_000)
        return s.QueryOffsetResponse(status=status(d.OK), offset=offset)

    def get(self, request) -> s.GetOffsetResponse:
        mq = queue_of(request.message_queue)
        offset = self.consumer(self._group(request)).committed(mq)
        if offset < 0:
            return s.GetOffsetResponse(status=status(
                d.OFFSET_NOT_FOUND, f"group {request.group.name!r} committed no offset of {mq}"))
        return s.GetOffsetResponse(status=status(d.OK), offset=offset)

    def update(self, request) -> s.UpdateOffsetResponse:
        mq = queue_of(request.message_queue)
        if request.offset < 0:
            return s.UpdateOffsetResponse(status=status(d.ILLEGAL_OFFSET,
                                                        f"offset {request.offset} < 0"))
        self.consumer(self._group(request)).commit({mq: request.offset})
        return s.UpdateOffsetResponse(status=status(d.OK))

    def pull(self, request):
        """The messages of one pull, then the next offset, then the status."""
        mq = queue_of(request.message_queue)
        batch = request.batch_size or DEFAULT_PULL
        if not 1 <= batch <= MAX_BATCH or request.offset < 0:
            raise convert.ConvertError(d.BAD_REQUEST, f"batch_size 1 to {MAX_BATCH}, offset "
                                                      f">= 0 (got {batch}, {request.offset})")
        wait = min(max(duration_ms(request.long_polling_timeout), 0), MAX_WAIT_MS)
        r = self.consumer(self._group(request)).pull(
            mq, request.offset, batch, wait, expression_of(request.filter_expression))
        for m in r.messages:
            yield s.PullMessageResponse(message=convert.incoming(m, ""))
        yield s.PullMessageResponse(next_offset=r.next_offset)
        if r.status is PullStatus.OFFSET_ILLEGAL:
            yield s.PullMessageResponse(status=status(
                d.ILLEGAL_OFFSET, f"offset {request.offset} is outside {r.min_offset} .. "
                                  f"{r.max_offset}"))
        elif not r.messages:
            yield s.PullMessageResponse(status=status(d.MESSAGE_NOT_FOUND, "no new message"))
        else:
            yield s.PullMessageResponse(status=status(d.OK))
