"""``SimpleConsumer``: share consumption (RocketMQ 5's name; Kafka's share
groups). Any number of consumers of one group read any queue, with no
rebalance: each ``receive`` asks a broker group's master for the group's
next visible messages (POP), which stay this consumer's for the invisible
duration; ``ack`` ends a message, ``nack`` makes it visible again (to
anyone), ``change_invisible_duration`` keeps it longer. A message neither
acked nor renewed in time is delivered again, with its ``delivery_count``
one higher; after ``max_deliveries`` it goes to ``%DLQ%<group>``.

    with SimpleConsumer("workers", subscriptions="Orders", zookeeper=..., cluster=...) as c:
        for msg in c.receive(16, wait_ms=5000):
            handle(msg)
            c.ack(msg)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from duomq.client.base import ClientBase, raise_for
from duomq.client.shape import check_shape
from duomq.common.client_config import SimpleConsumerConfig
from duomq.common.errors import (
    BadRequestError,
    DuomqError,
    NoRouteError,
    ReceiptExpiredError,
    for_status,
)
from duomq.common.message import MessageExt, decode_records
from duomq.common.names import validate_name
from duomq.common.subscription import parse
from duomq.proto import pb

ANSWER_MARGIN_S = 5.0     # a held POP's request waits this much longer than the hold
RECEIPTS_PER_ACK = 1024   # most receipts one share ack names (the broker's limit)


@dataclass(slots=True)
class ReceivedMessage(MessageExt):
    """A message received by a ``SimpleConsumer``: which delivery of it this
    is, and until when it is this consumer's (the broker's wall clock, ms)."""

    delivery_count: int = 1
    invisible_until_ms: int = 0
    receipt_key: int = 0       # the pop's random key: only this consumer's acks name it

    @property
    def receipt(self) -> str:
        """This delivery's handle: broker group, topic, queue, offset and
        delivery count (a receipt of an earlier delivery holds nothing)."""
        return (f"{self.broker_group}/{self.topic}/{self.queue_id}/{self.queue_offset}/"
                f"{self.delivery_count}")


def subscriptions_of(given) -> dict[str, str]:
    """``"Topic"``, ``["A", "B"]`` or ``{"Topic": "TagA || TagB"}`` as
    topic -> expression, each checked."""
    if isinstance(given, str):
        given = {given: "*"}
    elif not isinstance(given, dict):
        given = {t: "*" for t in given}
    if not given:
        raise BadRequestError("a SimpleConsumer subscribes to at least one topic")
    for topic, expression in given.items():
        validate_name("topic", topic, allow_system=True)
        parse(expression)
    return dict(given)


class SimpleConsumer(ClientBase):
    def __init__(self, group: str, *old: Any,
                 subscriptions: str | Iterable[str] | dict[str, str] | None = None,
                 zookeeper: str | None = None, cluster: str | None = None,
                 config: SimpleConsumerConfig | None = None, zk=None, **overrides):
        check_shape("SimpleConsumer", group, old, subscriptions=subscriptions)
        assert subscriptions is not None
        self.config = config or SimpleConsumerConfig(group=group, **overrides)
        self.subscriptions = subscriptions_of(subscriptions)
        super().__init__(zookeeper, cluster, zk=zk)
        self.timeout_s = self.config.request_timeout_ms / 1000
        self._turn = 0
        self._popped_at: set[str] = set()     # masters asked: told when this consumer closes
        # messages read, by (broker group, broker id) they were read at
        self.reads_by_broker: dict[tuple[str, int], int] = {}

    @property
    def group(self) -> str:
        return self.config.group

    def heartbeat_groups(self):
        return [], [self.group]

    # ------------------------------------------------------------ receive
    def receive(self, max_messages: int = 16, wait_ms: int = 0) -> list[ReceivedMessage]:
        """Up to ``max_messages`` messages of the group's topics, each
        invisible to the group's other consumers until it is acked or its
        invisible duration ends. Every broker group is asked once without
        waiting; when none has any, one is asked again, held up to
        ``wait_ms`` (long polling). An empty list when nothing came."""
        if max_messages <= 0:
            raise BadRequestError("max_messages must be > 0")
        targets = self._targets()
        if not targets:
            raise NoRouteError(f"no broker group serves topics {sorted(self.subscriptions)}")
        n = len(targets)
        first = self._turn % n
        self._turn += 1
        order = [targets[(first + i) % n] for i in range(n)]
        answered = []
        failure: DuomqError | None = None
        for topic, group in order:
            try:
                got = self.pop(topic, group, max_messages, 0)
            except DuomqError as exc:     # one broker group down: the others still serve
                failure = exc
                continue
            if got:
                return got
            answered.append((topic, group))
        if not answered:
            assert failure is not None
            raise failure
        wait_ms = min(max(wait_ms, 0), self.config.long_polling_timeout_ms)
        if wait_ms == 0:
            return []
        topic, group = answered[0]
        return self.pop(topic, group, max_messages, wait_ms)

    def _targets(self) -> list[tuple[str, str]]:
        out = []
        for topic in sorted(self.subscriptions):
            for group in sorted(self.route(topic).groups):
                out.append((topic, group))
        return out

    def pop(self, topic: str, group: str, max_messages: int, wait_ms: int, *,
             expression: str | None = None, invisible_ms: int | None = None,
             client_id: str | None = None) -> list[ReceivedMessage]:
        """One POP at ``group``'s master; ``expression``, ``invisible_ms``
        and ``client_id`` stand in for the consumer's own (a gateway that
        pops for the clients it serves: duomq proxy)."""
        cfg = self.config
        expression = self.subscriptions[topic] if expression is None else expression
        req = pb.PopRequest(consumer_group=self.group, topic=topic, max_messages=max_messages,
                            invisible_ms=invisible_ms or cfg.invisible_duration_ms,
                            max_wait_ms=wait_ms, subscription=expression,
                            max_deliveries=cfg.max_deliveries,
                            from_first=cfg.consume_from == "first", slave_reads=cfg.slave_reads,
                            client_id=client_id or self.client_id)
        address = self.master_address(group, topic)
        self._popped_at.add(address)
        try:
            status, error, resp = self.remoting.call(address, pb.POP, req,
                                                     self.timeout_s + wait_ms / 1000
                                                     + ANSWER_MARGIN_S)
        except DuomqError as exc:
            self.after_failure(exc, topic, group)
            raise
        if status == pb.NO_NEW_MESSAGE:
            return []
        if status != pb.OK:
            refused = for_status(status, error)
            self.after_failure(refused, topic, group)
            raise refused
        sub = parse(expression)
        out = []
        got = decode_records(resp.records, group)
        self._count_reads(group, self._master_id(group), len(got))
        for m, count in zip(got, resp.delivery_counts, strict=True):
            if sub.matches(m.tags):
                out.append(ReceivedMessage(**_fields(m), delivery_count=count,
                                           invisible_until_ms=resp.deadline_ms,
                                           receipt_key=resp.receipt_key))
        if resp.slave_reads:
            out += self._read_elsewhere(topic, group, resp, sub)
        return out

    def close(self) -> None:
        """Tell the masters it read from that this reader is gone (so that
        ``duomq group delete`` need not wait for it to fall silent), then
        close."""
        if not self._closed:
            bye = pb.HeartbeatRequest(client_id=self.client_id, consumer_groups=[self.group],
                                      leaving=True)
            told = []
            for address in self._popped_at:
                try:
                    told.append(self.remoting.request(address, pb.HEARTBEAT, bye, 1))
                except DuomqError:
                    pass
            for f in told:
                try:
                    f.result(1.5)
                except Exception:          # noqa: BLE001 - a goodbye lost: it falls silent
                    pass
        super().close()

    # ------------------------------------------------------------ reads at a slave
    def _read_elsewhere(self, topic: str, group: str, resp, sub) -> list[ReceivedMessage]:
        """The messages a pop handed out from a cold backlog: read at the
        slave it names (within ``max_replica_lag_ms``), what the slave lacks
        yet at the master. A message neither has (retention took it) is
        skipped here and comes back after its invisible time. One whose
        tags do not match (a tag code shared by another tag) is acked."""
        slave = self.members.of(group).get(resp.read_from_broker_id)
        out: list[ReceivedMessage] = []
        foreign: list[ReceivedMessage] = []
        for read in resp.slave_reads:
            counts = dict(zip(read.queue_offsets, read.delivery_counts, strict=True))
            found: dict[int, MessageExt] = {}
            if slave is not None and slave.address:
                found = self._pull_range(slave.address, topic, read.queue_id, counts, group)
                self._count_reads(group, slave.broker_id, len(found))
            missing = {o: n for o, n in counts.items() if o not in found}
            if missing:
                more = self._pull_range(self.master_address(group, topic), topic,
                                        read.queue_id, missing, group)
                self._count_reads(group, self._master_id(group), len(more))
                found.update(more)
            for offset in sorted(counts):
                m = found.get(offset)
                if m is None:
                    continue
                r = ReceivedMessage(**_fields(m), delivery_count=counts[offset],
                                    invisible_until_ms=resp.deadline_ms,
                                    receipt_key=resp.receipt_key)
                (out if sub.matches(m.tags) else foreign).append(r)
        if foreign:
            self.ack(foreign)
        return out

    def _pull_range(self, address: str, topic: str, qid: int, wanted: dict[int, int],
                    group: str) -> dict[int, MessageExt]:
        """The messages of ``wanted`` (queue offsets) that ``address``
        serves, by pulls over their span; none on an error or a lag past
        ``max_replica_lag_ms``."""
        offset, last = min(wanted), max(wanted)
        out: dict[int, MessageExt] = {}
        while offset <= last:
            req = pb.PullRequest(consumer_group=self.group, topic=topic, queue_id=qid,
                                 queue_offset=offset, max_messages=last - offset + 1,
                                 max_replica_lag_ms=self.config.max_replica_lag_ms)
            try:
                status, _error, resp = self.remoting.call(address, pb.PULL, req, self.timeout_s)
            except DuomqError:
                break
            if status != pb.OK or not resp.count:
                break
            for m in decode_records(resp.records, group):
                if m.queue_offset in wanted:
                    out[m.queue_offset] = m
            if resp.next_offset <= offset:
                break
            offset = resp.next_offset
        return out

    def _master_id(self, group: str) -> int:
        return next((b for b, m in self.members.of(group).items() if m.is_master), -1)

    def _count_reads(self, group: str, broker_id: int, n: int) -> None:
        if n:
            key = (group, broker_id)
            self.reads_by_broker[key] = self.reads_by_broker.get(key, 0) + n

    # ------------------------------------------------------------ acks
    def ack(self, msgs: ReceivedMessage | Iterable[ReceivedMessage]) -> None:
        """The message (or each of a list: one request per broker group) is
        consumed: never delivered again. A receipt that no longer holds its
        message (its invisible time ended, or it was released) raises
        ReceiptExpiredError naming it, after the others were acked: that
        message is not lost, it is delivered again."""
        self._change(msgs, pb.ACCEPT, 0)

    def nack(self, msgs: ReceivedMessage | Iterable[ReceivedMessage], delay_ms: int = 0) -> None:
        """Not consumed: visible again to the group (any consumer) after
        ``delay_ms``."""
        self._change(msgs, pb.RELEASE, delay_ms)

    def change_invisible_duration(self, msg: ReceivedMessage, ms: int) -> None:
        """Keep the message ``ms`` more from now (Kafka's RENEW); its
        ``invisible_until_ms`` is updated."""
        self._change(msg, pb.RENEW, ms)

    def _change(self, msgs, action: pb.ShareAction, ms: int) -> None:
        if isinstance(msgs, ReceivedMessage):
            msgs = [msgs]
        elif isinstance(msgs, Iterable):
            msgs = list(msgs)
        if not isinstance(msgs, list) or not all(isinstance(m, ReceivedMessage) for m in msgs):
            raise BadRequestError("only messages this consumer received can be acked")
        by_target: dict[tuple[str, str], list[ReceivedMessage]] = {}
        for m in msgs:
            by_target.setdefault((m.broker_group, m.topic), []).append(m)
        expired = []
        batches = [(target, all_[i:i + RECEIPTS_PER_ACK]) for target, all_ in by_target.items()
                   for i in range(0, len(all_), RECEIPTS_PER_ACK)]
        for (group, topic), batch in batches:
            resp = self.share_ack(group, topic, [(m.queue_id, m.queue_offset, m.delivery_count,
                                                  m.receipt_key) for m in batch], action, ms)
            for m, st, why in zip(batch, resp.statuses, resp.errors, strict=True):
                if st != pb.OK:
                    expired.append(f"{why} (receipt {m.receipt})")
                elif action == pb.RENEW:
                    m.invisible_until_ms = resp.deadline_ms
        if expired:
            raise ReceiptExpiredError(f"RECEIPT_EXPIRED: {'; '.join(expired)}")

    def share_ack(self, group: str, topic: str, receipts: list[tuple[int, int, int, int]],
                  action: pb.ShareAction, ms: int, client_id: str | None = None):
        """One SHARE_ACK at ``group``'s master of ``receipts`` (queue id,
        queue offset, delivery count, key; at most RECEIPTS_PER_ACK): its
        answer (a status per receipt, and a renewal's deadline)."""
        req = pb.ShareAckRequest(consumer_group=self.group, topic=topic, action=action,
                                 ms=ms, client_id=client_id or self.client_id)
        for qid, offset, count, key in receipts:
            req.receipts.add(queue_id=qid, queue_offset=offset, delivery_count=count, key=key)
        address = self.master_address(group, topic)
        try:
            status, error, resp = self.remoting.call(address, pb.SHARE_ACK, req, self.timeout_s)
        except DuomqError as exc:
            self.after_failure(exc, topic, group)
            raise
        raise_for(status, error)
        return resp


def _fields(m: MessageExt) -> dict[str, Any]:
    return {f: getattr(m, f) for f in MessageExt.__slots__}
