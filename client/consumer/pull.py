"""``PullConsumer``: the application drives offsets explicitly."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from duomq.client.base import ClientBase, raise_for
from duomq.client.cluster.members import Members, read_candidates, read_target
from duomq.client.metrics import error_name
from duomq.client.shape import check_shape
from duomq.common.client_config import ConsumerConfig
from duomq.common.errors import (
    BadRequestError,
    BrokerSystemError,
    BrokerUnreachableError,
    NoRouteError,
    ReplicaLagError,
    RequestTimeoutError,
    TopicNotExistError,
    for_status,
)
from duomq.common.message import (
    MessageExt,
    MessageQueue,
    PullStatus,
    decode_records,
    lookup_key,
    parse_msg_id_epoch,
)
from duomq.common.names import DLQ_PREFIX, RETRY_PREFIX
from duomq.common.role import Role
from duomq.common.subscription import Subscription, parse
from duomq.coordinator.nodes import MemberNode
from duomq.coordinator.topics import TopicAdmin
from duomq.proto import pb

EVERYTHING = parse("*")
AVOID_SLAVE_S = 1.0     # a slave too far behind, or unreachable, is tried last this long
LAG_RETRY_S = 0.1       # read_from=slave: a lagging slave is asked again this often


@dataclass
class PullResult:
    status: PullStatus
    messages: list[MessageExt]
    next_offset: int
    min_offset: int
    max_offset: int
    suggest_broker_id: int | None = None   # read advice from the broker
    advice_ttl_ms: int = 0
    replica_lag_ms: int | None = None      # served by a slave: its lag behind its master


def pull_result(mq: MessageQueue, status: int, error: str, resp,
                sub: Subscription = EVERYTHING) -> PullResult:
    """Turn a pull answer into a PullResult (or raise for an error status).
    The broker filtered by tag code; the tags themselves are checked here."""
    pull_status = PullStatus.of_wire(status)
    lag = resp.replica_lag_ms if resp is not None and resp.HasField("replica_lag_ms") else None
    if pull_status is PullStatus.FOUND:
        advice = resp.suggest_broker_id if resp.HasField("suggest_broker_id") else None
        messages = decode_records(resp.records, mq.broker_group)
        if not sub.everything:
            messages = [m for m in messages if sub.matches(m.tags)]
        return PullResult(PullStatus.FOUND, messages, resp.next_offset, resp.min_offset,
                          resp.max_offset, advice, resp.advice_ttl_ms, lag)
    if pull_status is not None and resp is not None:
        return PullResult(pull_status, [], resp.next_offset, resp.min_offset, resp.max_offset,
                          replica_lag_ms=lag)
    if status == pb.REPLICA_LAGGING:
        raise ReplicaLagError(f"REPLICA_LAGGING: {error}", lag)
    raise for_status(status, error)


def by_broker_group(mqs) -> dict[str, list[MessageQueue]]:
    """Queues grouped by the broker group that holds them (one request each)."""
    out: dict[str, list[MessageQueue]] = {}
    for mq in mqs:
        out.setdefault(mq.broker_group, []).append(mq)
    return out


class PullConsumer(ClientBase):
    def __init__(self, group: str = "DEFAULT_CONSUMER", *old: Any, zookeeper: str | None = None,
                 cluster: str | None = None, config: ConsumerConfig | None = None,
                 zk=None, **overrides):
        check_shape(type(self).__name__, group, old)
        self.config = config or ConsumerConfig(group=group, **overrides)
        super().__init__(zookeeper, cluster, zk=zk)
        self.timeout_s = self.config.request_timeout_ms / 1000
        self._advice: dict[MessageQueue, tuple[int, float]] = {}   # mq -> (broker id, until)
        self.reads_by_broker: dict[tuple[str, int], int] = {}
        self._read_from_broker: dict[MessageQueue, tuple[str, int]] = {}  # each queue's last read
        self._avoid: dict[tuple[str, int], float] = {}    # slave -> tried last until (monotonic)
        self._targets: dict[tuple, tuple[Members, MemberNode | None]] = {}  # read_target(s) last
        # (group, broker id) -> the lag a slave reported on its last answer, in ms
        self.replica_lag_ms: dict[tuple[str, int], int] = {}

    @property
    def group(self) -> str:
        return self.config.group

    def heartbeat_groups(self):
        return [], [self.group]

    def queues(self, topic: str) -> list[MessageQueue]:
        """Every readable queue of the topic, from its configuration: a group
        whose master is down still has its queues (a slave serves them)."""
        self.zk_connected()
        try:
            cfg = TopicAdmin(self.zk, self.cluster).describe(topic)
        except TopicNotExistError:
            raise TopicNotExistError(f"topic {topic!r} does not exist in cluster "
                                     f"{self.cluster!r}") from None
        return [MessageQueue(topic, g, q) for g in sorted(cfg.queues) for q in range(cfg.queues[g])]

    # ------------------------------------------------------------ where reads go
    def read_address(self, mq: MessageQueue) -> str:
        """The member a read of ``mq`` goes to: ``read_from``, and (when reading
        from the master) the brokers' read advice while it lasts. A slave that
        was too far behind (``max_replica_lag_ms``) or unreachable a moment
        ago is tried after the others for ``AVOID_SLAVE_S``."""
        advice = None
        now = time.monotonic()
        read_from = self.config.read_from
        if read_from == "master":
            held = self._advice.get(mq)
            if held is not None and held[1] > now:
                advice = held[0]
        group = mq.broker_group
        avoid = frozenset(bid for (g, bid), until in list(self._avoid.items())
                          if g == group and until > now)
        members = self.members.of(group)
        # every pull asks; the members change rarely: the last answer per
        # question, while the members are the same (a new view is a new dict)
        asked = (group, read_from, advice, avoid)
        last = self._targets.get(asked)
        if last is not None and last[0] is members:
            target = last[1]
        else:
            target = read_target(members, read_from, advice, avoid)
            if len(self._targets) > 1024:
                self._targets.clear()
            self._targets[asked] = (members, target)
        if target is None:
            if read_from == "slave":
                raise NoRouteError(f"no live slave of group {group!r} (read_from=slave never "
                                   f"reads from the master; slave_preferred does)")
            raise NoRouteError(f"no live broker of group {group!r}")
        key = (group, target.broker_id)
        self._read_from_broker[mq] = key
        self.reads_by_broker[key] = self.reads_by_broker.get(key, 0) + 1
        return target.address

    def note_advice(self, mq: MessageQueue, result: PullResult) -> None:
        if result.suggest_broker_id is not None:
            self._advice[mq] = (result.suggest_broker_id,
                                time.monotonic() + result.advice_ttl_ms / 1000)
        if result.replica_lag_ms is not None:
            key = self._read_from_broker.get(mq)
            if key is not None:
                self.replica_lag_ms[key] = result.replica_lag_ms

    def has_master(self, group: str) -> bool:
        return any(m.is_master and m.address for m in self.members.of(group).values())

    def note_read_failure(self, mq: MessageQueue, exc: BaseException) -> None:
        """A read of ``mq`` failed: a slave too far behind, or unreachable, is
        tried after the others for a while (``slave_preferred`` reads the
        master meanwhile, and comes back to the slave after ``AVOID_SLAVE_S``)."""
        key = self._read_from_broker.get(mq)
        if key is None or not isinstance(exc, (ReplicaLagError, RequestTimeoutError)):
            return
        if isinstance(exc, ReplicaLagError) and exc.lag_ms is not None:
            self.replica_lag_ms[key] = exc.lag_ms
        member = self.members.of(key[0]).get(key[1])
        if member is not None and member.role is Role.SLAVE:
            self._avoid[key] = time.monotonic() + AVOID_SLAVE_S

    def pull(self, mq: MessageQueue, offset: int, max_messages: int = 256,
             max_wait_ms: int = 0, subscription: str = "*") -> PullResult:
        """Messages of ``mq`` from ``offset``; with ``max_wait_ms`` the broker
        holds the pull until a message arrives (long polling); ``subscription``
        (``TagA || TagB``) keeps only those tags (NO_MATCHED_MESSAGE when a
        stretch of the queue held none of them: pull on from ``next_offset``)."""
        if self.metrics is None:
            return self._pull(mq, offset, max_messages, max_wait_ms, subscription)
        t0 = time.perf_counter()
        try:
            result = self._pull(mq, offset, max_messages, max_wait_ms, subscription)
        except Exception as exc:
            self.count_pull(mq, t0, None, exc)
            raise
        self.count_pull(mq, t0, result, None)
        return result

    def count_pull(self, mq: MessageQueue, t0: float, result: PullResult | None,
                   exc: BaseException | None) -> None:
        """A pull's time and outcome, and how late its first message arrived
        (``metrics_port``)."""
        m = self.metrics
        assert m is not None
        shard = m.shard()
        now = time.perf_counter()
        labels = (mq.topic, self.group)
        shard.histogram(("pull_cost_time", *labels)).observe(now - t0)
        shard.count[("pull_results", *labels,
                     result.status.name if result is not None else error_name(exc))] += 1
        if result is not None and result.messages:
            late = time.time() - result.messages[0].store_timestamp_ms / 1000
            shard.histogram(("delivery_latency", *labels)).observe(max(0.0, late))

    def _pull(self, mq: MessageQueue, offset: int, max_messages: int, max_wait_ms: int,
              subscription: str) -> PullResult:
        sub = parse(subscription)
        req = pb.PullRequest(consumer_group=self.group, topic=mq.topic, queue_id=mq.queue_id,
                             queue_offset=offset, max_messages=max_messages,
                             max_wait_ms=max_wait_ms, subscription=sub.expression,
                             max_replica_lag_ms=self.config.max_replica_lag_ms)
        deadline = time.monotonic() + max_wait_ms / 1000
        refused = 0
        while True:
            try:
                status, error, resp = self.remoting.call(self.read_address(mq), pb.PULL, req,
                                                         self.timeout_s + max_wait_ms / 1000)
                result = pull_result(mq, status, error, resp, sub)
            except ReplicaLagError as exc:
                # slave_preferred: the master (or a fresher slave) at once; a
                # slave that stays too far behind (and, with the master gone,
                # the only one left) is asked again until the poll's time is
                # up, then the error, naming the lag, is raised
                self.note_read_failure(mq, exc)
                refused += 1
                if self.config.read_from == "slave_preferred" and refused == 1:
                    continue
                left = deadline - time.monotonic()
                if left <= 0:
                    raise
                time.sleep(min(LAG_RETRY_S, left))
                continue
            self.note_advice(mq, result)
            return result

    def get_message(self, msg_id: str) -> MessageExt:
        """A stored message by its id (broker group, epoch, commit-log
        offset), from the group's master, else from any live member.
        MessageCutError when the offset holds another epoch's message: the
        one the id named was cut at a failover."""
        try:
            group, offset, epoch = parse_msg_id_epoch(msg_id)
        except ValueError as exc:
            raise BadRequestError(str(exc)) from None
        req = pb.GetMessageRequest(physical_offset=offset, consumer_group=self.group)
        if epoch is not None:          # the broker checks the record is of that epoch
            req.epoch = epoch
        status, error, resp = self._lookup(group, pb.GET_MESSAGE, req)
        raise_for(status, error)
        return decode_records(resp.record, group)[0]

    def query_by_key(self, topic: str, key: str, begin_ms: int = 0, end_ms: int = 0,
                     max_num: int = 32) -> list[MessageExt]:
        """Messages of ``topic`` that carry ``key`` among their keys, stored
        within ``[begin_ms, end_ms]`` (0: unbounded), newest first, at most
        ``max_num`` (a broker answers 64 at most): from every broker group of
        the topic, each through its key index on the master, else a live slave."""
        lookup_key(key)
        if max_num <= 0:
            raise BadRequestError(f"max_num must be positive, got {max_num}")
        req = pb.QueryByKeyRequest(topic=topic, key=key, begin_timestamp_ms=begin_ms,
                                   end_timestamp_ms=end_ms, max_num=max_num)
        found: list[MessageExt] = []
        for group in sorted({mq.broker_group for mq in self.queues(topic)}):
            status, error, resp = self._lookup(group, pb.QUERY_BY_KEY, req)
            raise_for(status, error)
            found += decode_records(resp.records, group)
        found.sort(key=lambda m: m.store_timestamp_ms, reverse=True)
        return found[:max_num]

    def _lookup(self, group: str, request_type: int, req) -> tuple:
        """A lookup's answer from the group's master, else from each live
        member in turn: one that cannot be reached is passed over (a killed
        master's node outlives it until its session expires, and its slave
        holds all it acked)."""
        candidates = [m.address for m in read_candidates(self.members.of(group), "master")]
        if not candidates:
            try:
                candidates = [self.master_address(group)]       # a route, without members
            except NoRouteError:
                raise NoRouteError(f"no live broker of group {group!r}") from None
        for i, address in enumerate(candidates):
            try:
                return self.remoting.call(address, request_type, req, self.timeout_s)
            except BrokerUnreachableError:
                if i == len(candidates) - 1:
                    raise
        raise AssertionError("unreachable")

    def _query(self, mq: MessageQueue, query: pb.OffsetQuery, timestamp_ms: int = 0) -> int:
        """An offset of ``mq`` from the member reads go to; a slave beyond
        ``max_replica_lag_ms`` refuses (slave_preferred then asks the master)."""
        req = pb.QueryOffsetRequest(topic=mq.topic, queue_id=mq.queue_id, query=query,
                                    timestamp_ms=timestamp_ms,
                                    max_replica_lag_ms=self.config.max_replica_lag_ms,
                                    consumer_group=self._owning_group(mq.topic))
        return self._ask_offsets(mq, req).offset

    def _owning_group(self, topic: str) -> str:
        """This group when ``topic`` is its retry or dead-letter topic (read
        with the group's permission alone), else ""."""
        return self.group if topic in (RETRY_PREFIX + self.group, DLQ_PREFIX + self.group) else ""

    def _ask_offsets(self, mq: MessageQueue, req: pb.QueryOffsetRequest
                     ) -> pb.QueryOffsetResponse:
        for attempt in range(2):
            status, error, resp = self.remoting.call(self.read_address(mq), pb.QUERY_OFFSET, req,
                                                     self.timeout_s)
            try:
                raise_for(status, error)
            except ReplicaLagError as exc:
                self.note_read_failure(mq, exc)
                if attempt or self.config.read_from != "slave_preferred":
                    raise
                continue
            return resp
        raise AssertionError("unreachable")

    def offsets(self, mqs: Iterable[MessageQueue], query: pb.OffsetQuery,
                timestamp_ms: int = 0) -> dict[MessageQueue, int]:
        """``min_offset``, ``max_offset`` or ``offset_by_time`` of many queues:
        one request per topic and broker group."""
        runs: dict[tuple[str, str], list[MessageQueue]] = {}
        for mq in mqs:
            runs.setdefault((mq.broker_group, mq.topic), []).append(mq)
        out: dict[MessageQueue, int] = {}
        for (_group, topic), run in runs.items():
            req = pb.QueryOffsetRequest(topic=topic, query=query, timestamp_ms=timestamp_ms,
                                        max_replica_lag_ms=self.config.max_replica_lag_ms,
                                        queue_ids=[mq.queue_id for mq in run],
                                        consumer_group=self._owning_group(topic))
            resp = self._ask_offsets(run[0], req)
            if len(resp.offsets) != len(run):
                raise BrokerSystemError(f"asked the offsets of {len(run)} queues of {topic!r}, "
                                        f"got {len(resp.offsets)}")
            out.update(zip(run, resp.offsets, strict=True))
        return out

    def min_offset(self, mq: MessageQueue) -> int:
        return self._query(mq, pb.MIN_OFFSET)

    def max_offset(self, mq: MessageQueue) -> int:
        return self._query(mq, pb.MAX_OFFSET)

    def offset_by_time(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return self._query(mq, pb.BY_TIME, timestamp_ms)

    def commit(self, offsets: dict[MessageQueue, int]) -> None:
        """Commit offsets (next offset to consume) to each queue's master."""
        for items in by_broker_group(offsets).values():
            req = pb.CommitOffsetRequest(consumer_group=self.group)
            for mq in items:
                req.offsets.add(topic=mq.topic, queue_id=mq.queue_id, offset=offsets[mq])
            mq = items[0]
            status, error, _ = self.remoting.call(self.master_address(mq.broker_group, mq.topic),
                                                  pb.COMMIT_OFFSET, req, self.timeout_s)
            raise_for(status, error)

    def committed(self, mq: MessageQueue) -> int:
        """The group's committed offset of ``mq``; -1 if never committed."""
        req = pb.FetchOffsetRequest(consumer_group=self.group)
        req.queues.add(topic=mq.topic, queue_id=mq.queue_id)
        try:
            address = self.master_address(mq.broker_group, mq.topic)
        except NoRouteError:
            address = self.read_address(mq)      # a slave keeps a copy of the offsets
        status, error, resp = self.remoting.call(address, pb.FETCH_OFFSET, req, self.timeout_s)
        raise_for(status, error)
        return resp.offsets[0].offset

    def committed_many(self, mqs: Iterable[MessageQueue]) -> dict[MessageQueue, int]:
        """The group's committed offsets of ``mqs`` (-1: never committed):
        one request per broker group."""
        out: dict[MessageQueue, int] = {}
        for group, items in by_broker_group(mqs).items():
            req = pb.FetchOffsetRequest(consumer_group=self.group)
            for mq in items:
                req.queues.add(topic=mq.topic, queue_id=mq.queue_id)
            try:
                address = self.master_address(group, items[0].topic)
            except NoRouteError:
                address = self.read_address(items[0])
            status, error, resp = self.remoting.call(address, pb.FETCH_OFFSET, req,
                                                     self.timeout_s)
            raise_for(status, error)
            got = {(o.topic, o.queue_id): o.offset for o in resp.offsets}
            for mq in items:
                out[mq] = got.get((mq.topic, mq.queue_id), -1)
        return out
