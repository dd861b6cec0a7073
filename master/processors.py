"""One handler per request type. Each takes the decoded request and returns
``(status, error, response_message)`` for an answer (OK, or an outcome that
carries a response: SLAVE_NOT_AVAILABLE, NO_MATCHED_MESSAGE, ...), or
``None`` when the answer is deferred (a send waiting for its flush, a held
pull). A request that cannot be served raises a ``DuomqError`` (or a
``RecordError``); the dispatcher answers its status (``errors.answer_for``)."""

from __future__ import annotations

import time

from duomq.common import delay as d
from duomq.common import subscription
from duomq.common.errors import (
    BadRequestError,
    MessageTooLargeError,
    NotMasterError,
    ServiceNotAvailableError,
    TopicNotExistError,
)
from duomq.common.message import PullStatus, decode_records, lookup_key
from duomq.common.names import RETRY_PREFIX, validate_name
from duomq.format import record as rec
from duomq.master import requeue
from duomq.master.health import readiness
from duomq.master.pull_hold import HeldPull
from duomq.master.read_advice import ADVICE_MIN_BEHIND, master_says_go_to_slave, slave_says_go_back
from duomq.proto import pb
from duomq.store.residency import resident_fraction

PROBE_BYTES = 64 << 10        # the page-cache windows probed for a pull
# A sequential reader's next position is usually cached by the kernel's
# readahead even deep in a cold backlog (this machine's disk reads 8 MiB
# ahead), so a second window is probed this far past the pull position.
PROBE_AHEAD = 16 << 20
QUERY_DEFAULT_NUM = 32        # messages a lookup by key returns unless asked (RocketMQ's)
QUERY_MAX_NUM = 64            # ... and at most


class Processors:
    def __init__(self, broker):
        self.broker = broker
        self.store = broker.store
        self.config = broker.config

    # ------------------------------------------------------------ send
    def _master_only(self) -> None:
        if self.broker.role != "MASTER":
            raise NotMasterError(self.broker.not_writable_reason())

    def _writable(self) -> None:
        if not self.broker.writable():
            raise ServiceNotAvailableError(self.broker.not_writable_reason())

    def _hosted(self, topic: str) -> int:
        """The number of queues this group hosts of ``topic``."""
        queues = self.broker.hosted_queues(topic)
        if queues is None:
            raise TopicNotExistError(f"topic {topic!r} is not hosted by broker group "
                                     f"{self.config.group!r}")
        return queues

    def send(self, identity: bytes, request_id: int, req: pb.SendRequest):
        b = self.broker
        self._master_only()
        validate_name("topic", req.topic, allow_system=True)
        queues = self._hosted(req.topic)
        if not 0 <= req.queue_id < queues:
            raise BadRequestError(f"queue {req.queue_id} of topic {req.topic!r} does not exist "
                                  f"(this group hosts queues 0..{queues - 1})")
        if req.count <= 0:
            raise BadRequestError("a send carries at least one record")
        self._writable()
        if req.scheduled:
            resp, end = self._put_scheduled(req)
        else:
            put = self.store.put_batch(req.topic, req.queue_id, bytearray(req.records), req.count)
            resp = pb.SendResponse(queue_offset=put.queue_offset, broker_group=self.config.group)
            resp.physical_offsets.extend(put.physical_offsets)
            end = put.end_offset
        b.appended = True
        if b.sync_replication and not b.slaves_available():
            return pb.SLAVE_NOT_AVAILABLE, (
                f"stored, but fewer than sync_replicas ({self.config.sync_replicas}) in-sync "
                f"slaves are connected to confirm it"), resp
        if b.ack_waiter(end, identity, request_id, resp):
            return None
        return pb.OK, "", resp

    def _put_scheduled(self, req: pb.SendRequest):
        """A batch with delayed messages: each goes to its level's queue of the
        schedule topic (or, when not delayed, to its queue), one write per run
        of records bound for one queue. Everything is validated before anything
        is stored."""
        buf = bytearray(req.records)
        rec.scan_batch(buf, req.topic.encode(), self.config.max_message_bytes, req.count)
        now = int(time.time() * 1000)
        placed = [requeue.schedule(m, req.queue_id, self.broker.delay_levels, now)
                  for m in decode_records(buf, self.config.group)]
        for _topic, _qid, record in placed:
            if len(record) > self.config.max_message_bytes:
                raise rec.RecordTooLargeError(
                    f"a delayed record is {len(record)} bytes with its schedule properties, "
                    f"over max_message_bytes ({self.config.max_message_bytes})")
        resp = pb.SendResponse(broker_group=self.config.group, queue_offset=-1)
        puts = self.store.put_records(placed)
        for put in puts:
            resp.physical_offsets.extend(put.physical_offsets)
        return resp, puts[-1].end_offset

    # ------------------------------------------------------------ pull
    def pull_held(self, identity: bytes, request_id: int, req: pb.PullRequest):
        """A held pull answered now: what it finds, or NO_NEW_MESSAGE."""
        return self.pull(identity, request_id, req, held=True)

    def pull(self, identity: bytes, request_id: int, req: pb.PullRequest, held: bool = False):
        b = self.broker
        cq = self.store.find_queue(req.topic, req.queue_id)
        if cq is None:
            self._hosted(req.topic)
        if req.queue_offset < 0:
            raise BadRequestError("queue_offset must be >= 0")
        max_n = min(req.max_messages or self.config.max_pull_messages, self.config.max_pull_messages)
        max_b = min(req.max_bytes or self.config.max_pull_bytes, self.config.max_pull_bytes)
        sub = subscription.parse(req.subscription)
        advice = self._advice(cq, req.queue_offset) if cq is not None else None
        got = self.store.get_messages(req.topic, req.queue_id, req.queue_offset, max_n, max_b,
                                      b.visible_offset, None if sub.everything else sub.codes)
        if got.count:
            resp = pb.PullResponse(count=got.count, records=got.records,
                                   next_offset=got.next_offset, min_offset=got.min_offset,
                                   max_offset=got.max_offset)
            if advice is not None:
                resp.suggest_broker_id = advice
                resp.advice_ttl_ms = self.config.read_advice_ttl_ms
                b.redirects += 1
            return pb.OK, "", resp
        if got.status is PullStatus.NO_MATCHED_MESSAGE:   # pulled again from next_offset
            return got.status.wire, "", pb.PullResponse(
                next_offset=got.next_offset, min_offset=got.min_offset, max_offset=got.max_offset)
        if got.status is PullStatus.OFFSET_ILLEGAL:
            return got.status.wire, (f"offset {req.queue_offset} is outside "
                                     f"[{got.min_offset}, {got.max_offset}]"), \
                pb.PullResponse(next_offset=got.next_offset, min_offset=got.min_offset,
                                max_offset=got.max_offset)
        wait_ms = min(req.max_wait_ms, self.config.long_polling_timeout_ms)
        if wait_ms > 0 and not held:
            b.pull_hold.hold(req.topic, req.queue_id,
                             HeldPull(identity, request_id, req, time.monotonic() + wait_ms / 1000))
            return None
        return PullStatus.NO_NEW_MESSAGE.wire, "", pb.PullResponse(next_offset=req.queue_offset,
                                                      min_offset=got.min_offset,
                                                      max_offset=got.max_offset)

    def _advice(self, cq, queue_offset: int) -> int | None:
        """Read advice for a pull at ``queue_offset`` (decided before the read,
        which would warm the pages it probes): a cold or deep backlog goes to an
        in-sync slave; a slave sends a reader that caught up back to the master."""
        b, cfg = self.broker, self.config
        entry = cq.entry(queue_offset)
        if entry is None:
            return None
        phys = entry[0]
        if b.role == "MASTER":
            behind = self.store.commitlog.max_offset - phys
            if b.ha is None or behind < ADVICE_MIN_BEHIND:
                return None
            slaves = b.ha.in_sync_ids()
            if not slaves:
                return None
            resident = self._residency(phys, behind)
            if master_says_go_to_slave(behind, b.total_memory, cfg.access_in_memory_max_ratio,
                                       resident, True):
                return min(slaves)
        elif b.ha_client is not None:
            master_id = b.registry.master.get("broker_id")
            lag = max(0, b.ha_client.master_max - phys)
            if master_id is not None and slave_says_go_back(lag, b.total_memory,
                                                            cfg.slave_read_back_ratio, True):
                return int(master_id)
        return None

    def _residency(self, phys: int, behind: int) -> float | None:
        """The lower page-cache residency of the window at ``phys`` and of the
        one ``PROBE_AHEAD`` past it (when the log reaches that far); None
        when it cannot be told."""
        mfq = self.store.commitlog.mfq
        probes = [phys] + ([phys + PROBE_AHEAD] if behind > PROBE_AHEAD + PROBE_BYTES else [])
        fractions = []
        for at in probes:
            seg = mfq.find(at)
            if seg is not None:
                f = resident_fraction(seg.fd, at - seg.base, min(PROBE_BYTES, seg.end - at))
                if f is not None:
                    fractions.append(f)
        return min(fractions) if fractions else None

    # ------------------------------------------------------------ offsets
    def query_offset(self, identity, request_id, req: pb.QueryOffsetRequest):
        cq = self.store.find_queue(req.topic, req.queue_id)
        if cq is None:
            self._hosted(req.topic)
            return pb.OK, "", pb.QueryOffsetResponse(offset=0)
        if req.query == pb.MIN_OFFSET:
            off = cq.min_offset
        elif req.query == pb.MAX_OFFSET:
            off = self.store.visible_max_offset(cq, self.broker.visible_offset)
        elif req.query == pb.BY_TIME:
            off = min(self.store.offset_by_time(req.topic, req.queue_id, req.timestamp_ms),
                      self.store.visible_max_offset(cq, self.broker.visible_offset))
        else:
            raise BadRequestError(f"unknown offset query {req.query}")
        return pb.OK, "", pb.QueryOffsetResponse(offset=off)

    def commit_offset(self, identity, request_id, req: pb.CommitOffsetRequest):
        self._master_only()                # offsets live on the master; slaves only copy them
        validate_name("consumer group", req.consumer_group, allow_system=True)
        for q in req.offsets:
            if q.offset < 0:
                raise BadRequestError(f"offset {q.offset} for {q.topic}#{q.queue_id} is negative")
        for q in req.offsets:
            self.broker.offsets.commit(req.consumer_group, q.topic, q.queue_id, q.offset)
        return pb.OK, "", pb.CommitOffsetResponse()

    def fetch_offset(self, identity, request_id, req: pb.FetchOffsetRequest):
        resp = pb.FetchOffsetResponse()
        for q in req.queues:
            resp.offsets.add(topic=q.topic, queue_id=q.queue_id,
                             offset=self.broker.offsets.fetch(req.consumer_group, q.topic,
                                                              q.queue_id))
        return pb.OK, "", resp

    # ------------------------------------------------------------ send back, lookups
    def send_back(self, identity, request_id, req: pb.SendBackRequest):
        """A consumer failed a message stored here: write it again into the
        group's retry topic (delayed) or dead-letter topic."""
        b = self.broker
        self._master_only()
        validate_name("consumer group", req.consumer_group)
        self._writable()
        view = self._record(req.physical_offset, self.store.commitlog.max_offset)
        msg = decode_records(view, self.config.group)[0]
        topic, qid, record = requeue.send_back(
            msg, req.consumer_group, b.delay_levels, max(req.max_reconsume_times, 0),
            req.delay_level, req.dead_letter)
        try:
            put = self.store.put_batch(topic, qid, bytearray(record), 1)
        except rec.RecordError as exc:
            raise MessageTooLargeError(f"cannot store the message again: {exc}") from exc
        b.appended = True
        where = topic if topic != d.SCHEDULE_TOPIC else RETRY_PREFIX + req.consumer_group
        resp = pb.SendBackResponse(topic=where, physical_offset=put.physical_offsets[0])
        if b.ack_waiter(put.end_offset, identity, request_id, resp, pb.SEND_BACK):
            return None
        return pb.OK, "", resp

    def _record(self, physical_offset: int, visible_end: int):
        view = self.store.read_record(physical_offset, visible_end)
        if view is None:
            raise BadRequestError(f"no message is stored at offset {physical_offset} of broker "
                                  f"group {self.config.group!r}")
        return view

    def get_message(self, identity, request_id, req: pb.GetMessageRequest):
        view = self._record(req.physical_offset, self.broker.visible_offset)
        return pb.OK, "", pb.GetMessageResponse(record=bytes(view))

    def query_by_key(self, identity, request_id, req: pb.QueryByKeyRequest):
        validate_name("topic", req.topic, allow_system=True)
        lookup_key(req.key)
        if req.max_num < 0 or req.begin_timestamp_ms < 0 or req.end_timestamp_ms < 0:
            raise BadRequestError("max_num and the time range must not be negative")
        end = req.end_timestamp_ms or int(time.time() * 1000) + 1000
        max_num = min(req.max_num or QUERY_DEFAULT_NUM, QUERY_MAX_NUM)
        found = self.store.query_by_key(req.topic, req.key, req.begin_timestamp_ms, end, max_num,
                                        self.config.max_pull_bytes, self.broker.visible_offset)
        return pb.OK, "", pb.QueryByKeyResponse(count=len(found), records=b"".join(found))

    # ------------------------------------------------------------ queue locks
    def lock_queues(self, identity, request_id, req: pb.LockQueuesRequest):
        self._master_only()                # locks live on the master
        self._check_lock_request(req)
        got = self.broker.queue_locks.lock(req.consumer_group, req.client_id,
                                           [(q.topic, q.queue_id) for q in req.queues],
                                           time.monotonic())
        resp = pb.LockQueuesResponse()
        for topic, qid in got:
            resp.locked.add(topic=topic, queue_id=qid)
        return pb.OK, "", resp

    def unlock_queues(self, identity, request_id, req: pb.LockQueuesRequest):
        self._master_only()
        self._check_lock_request(req)
        self.broker.queue_locks.unlock(req.consumer_group, req.client_id,
                                       [(q.topic, q.queue_id) for q in req.queues])
        return pb.OK, "", pb.LockQueuesResponse()

    @staticmethod
    def _check_lock_request(req: pb.LockQueuesRequest) -> None:
        validate_name("consumer group", req.consumer_group, allow_system=True)
        if not req.client_id:
            raise BadRequestError("a lock request names its client")

    # ------------------------------------------------------------ heartbeat, status
    def heartbeat(self, identity, request_id, req: pb.HeartbeatRequest):
        self.broker.clients[req.client_id or identity.hex()] = (
            time.monotonic(), list(req.producer_groups), list(req.consumer_groups))
        return pb.OK, "", pb.HeartbeatResponse(broker_group=self.config.group,
                                               broker_id=self.config.broker_id,
                                               role=self.broker.role)

    def broker_status(self, identity, request_id, req):
        b, store = self.broker, self.store
        resp = pb.BrokerStatusResponse(
            broker_group=self.config.group, broker_id=self.config.broker_id, role=b.role,
            flush=self.config.flush.value, min_physical_offset=store.commitlog.min_offset,
            max_physical_offset=store.commitlog.max_offset, flushed_offset=b.flushed_offset,
            confirmed_offset=b.visible_offset, bad_requests=b.bad_requests,
            messages_stored=store.messages_stored, clients=len(b.clients),
            epoch=b.registry.epoch if b.registry else 0,
            master_address=(b.registry.master_address() or "") if b.registry else "",
            replicated_offset=b.replicated_offset, flushes=b.flush_service.syncs,
            read_redirects=b.redirects)
        health = b.health()
        resp.ready, resp.ready_reason = readiness(health, self.config.ha_max_gap_bytes,
                                                  self.config.ha_housekeeping_ms / 1000)
        resp.master_silent_s = health.master_silent_s
        if b.ha_client is not None:
            resp.master_max_offset = b.ha_client.master_max
        if b.ha is not None:
            for link in b.ha.status():
                resp.replicas.add(broker_id=link["broker_id"], address=link["address"],
                                  state=link["state"], acked_offset=link["acked_offset"],
                                  lag_bytes=link["lag_bytes"])
        for (topic, qid), cq in sorted(store.queues.items()):
            resp.queues.add(topic=topic, queue_id=qid, min_offset=cq.min_offset,
                            max_offset=store.visible_max_offset(cq, b.visible_offset))
        for (group, topic, qid), off in sorted(b.offsets.items()):
            resp.group_offsets.add(consumer_group=group, topic=topic, queue_id=qid, offset=off)
        return pb.OK, "", resp
