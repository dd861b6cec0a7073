"""The broker process: one serving thread owns the client ROUTER socket, the
replication ROUTER socket, the store's write path (as master), long polling
and the sends waiting for their durability conditions.

A broker plays one role at a time. As MASTER it appends sends, streams its
log to slaves (``replication.ha_service``) and acks a send once its flush
(SYNC_FLUSH) and its replication (SYNC) conditions hold. As SLAVE it follows
the master (``replication.ha_client``), serves read-only pulls and answers
writes with NOT_MASTER.

Consumers see messages up to ``visible_offset``: on a master the flushed
offset under SYNC_FLUSH and the offset ``sync_replicas`` slaves hold under
SYNC replication (so no consumer reads what a crash or a failover could take
back); on a slave, what it holds, capped at what its master lets consumers see.
"""

from __future__ import annotations

import logging
import os
import signal
import struct
import threading
import time

import zmq

from duomq import __version__
from duomq.common.config import BrokerConfig, FlushDiskType, ReplicationMode
from duomq.common.delay import parse_levels
from duomq.common.errors import REJECTED, DuomqError, answer_for
from duomq.common.memory import usable_memory
from duomq.common.service import PeriodicService, ServiceThread
from duomq.coordinator import zk as zkutil
from duomq.coordinator.ha_controller import HaController
from duomq.coordinator.registry import MASTER, SLAVE, BrokerRegistry
from duomq.flush import make_flush_service
from duomq.format.record import RecordError
from duomq.master.ack_waiters import NEVER, AckWaiter, AckWaiters
from duomq.master.health import BrokerHealth
from duomq.master.offsets import ConsumerOffsetManager
from duomq.master.processors import Processors
from duomq.master.pull_hold import PullRequestHoldService
from duomq.master.queue_locks import QueueLocks
from duomq.master.schedule import ScheduleService
from duomq.proto import codec, pb
from duomq.replication.ha_client import HAClient
from duomq.replication.ha_service import HAService
from duomq.slave.roles import RoleChanges
from duomq.store import MessageStore

log = logging.getLogger(__name__)
_NOTE = struct.Struct(">cqq")   # kind, offset, second offset
MAX_DRAIN = 512              # client messages handled before looking at other news
HOUSEKEEPING_S = 0.05
SCHEDULE_INTERVAL_S = 0.02   # how often due delayed messages are looked for
CLIENT_EXPIRY_S = 120        # a client not heard from this long is forgotten
MEMBER_INFO_INTERVAL_S = 1.0  # refresh of this broker's member node


class LoopNotifier:
    """Lets any thread post news to the serving thread (one PUSH socket per
    thread: ZeroMQ sockets are not shared between threads). Kinds: ``f``
    flushed offset; ``w`` only a wake-up (the serving loop re-reads what
    moved); ``P``, ``F``, ``D``, ``H`` role changes."""

    def __init__(self, ctx: zmq.Context, endpoint: str):
        self.ctx = ctx
        self.endpoint = endpoint
        self._local = threading.local()
        self._sockets = []
        self._lock = threading.Lock()

    def post(self, kind: bytes, a: int, b: int = 0) -> None:
        sock = getattr(self._local, "sock", None)
        if sock is None:
            sock = self._local.sock = self.ctx.socket(zmq.PUSH)
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(self.endpoint)
            with self._lock:
                self._sockets.append(sock)
        sock.send(_NOTE.pack(kind, a, b))

    def flushed(self, offset: int) -> None:
        self.post(b"f", offset)

    def wake(self) -> None:
        self.post(b"w", 0)

    def close(self):
        with self._lock:
            for s in self._sockets:
                s.close(linger=0)


class Broker(RoleChanges):
    """The broker process (see the module docstring); role changes are in
    ``slave.roles.RoleChanges``."""

    def __init__(self, config: BrokerConfig):
        self.config = config
        self.role = SLAVE
        self.store = MessageStore(config)
        self.offsets = ConsumerOffsetManager(os.path.join(config.data_dir, "consumer_offsets.json"))
        self.pull_hold = PullRequestHoldService()
        self.ack_waiters = AckWaiters()
        self.queue_locks = QueueLocks()
        self.delay_levels = parse_levels(config.message_delay_level)
        self.schedule: ScheduleService | None = None    # master only
        self._next_schedule = 0.0
        self.sync_flush = config.flush is FlushDiskType.SYNC_FLUSH
        self.sync_replication = config.replication is ReplicationMode.SYNC
        self.flushed_offset = 0
        self.replicated_offset = 0       # master: held by sync_replicas slaves
        self.master_confirmed = 0        # slave: what the master lets consumers see
        self.visible_offset = 0
        self.appended = False
        self.bad_requests = 0
        self.clients: dict[str, tuple] = {}
        self.ctx = zmq.Context()
        self.router = self.ha_router = self.notify_pull = None
        self.zk = None
        self.registry: BrokerRegistry | None = None
        self.ha: HAService | None = None
        self.ha_client: HAClient | None = None
        self.controller: HaController | None = None
        self.draining = False            # a master handing over: no new writes
        self._stop = threading.Event()
        self.processors = Processors(self)
        self.handlers = {
            pb.SEND: self.processors.send,
            pb.PULL: self.processors.pull,
            pb.QUERY_OFFSET: self.processors.query_offset,
            pb.COMMIT_OFFSET: self.processors.commit_offset,
            pb.FETCH_OFFSET: self.processors.fetch_offset,
            pb.HEARTBEAT: self.processors.heartbeat,
            pb.BROKER_STATUS: self.processors.broker_status,
            pb.LOCK_QUEUES: self.processors.lock_queues,
            pb.UNLOCK_QUEUES: self.processors.unlock_queues,
            pb.SEND_BACK: self.processors.send_back,
            pb.GET_MESSAGE: self.processors.get_message,
            pb.QUERY_BY_KEY: self.processors.query_by_key,
        }
        self._services: list[ServiceThread] = []
        self._next_retention = 0.0
        self._next_scan = 0.0
        self.total_memory = usable_memory()      # the machine's, or a pod's limit
        self.redirects = 0

    # ------------------------------------------------------------ lifecycle
    def _bind(self, sock, port: int) -> int:
        host = self.config.listen_host
        if port == 0:
            return sock.bind_to_random_port(f"tcp://{host}")
        sock.bind(f"tcp://{host}:{port}")
        return port

    def start(self) -> None:
        cfg = self.config
        log.info("%s", self.store.start())
        self.offsets.load()
        self.flushed_offset = self.store.commitlog.mfq.flushed_offset()
        self.router = self._socket(zmq.ROUTER)
        self.ha_router = self._socket(zmq.ROUTER)
        self.ha_router.setsockopt(zmq.ROUTER_MANDATORY, 1)   # never drop log bytes silently
        port = self._bind(self.router, cfg.port)
        ha_port = self._bind(self.ha_router, cfg.ha_port)
        if (port, ha_port) != (cfg.port, cfg.ha_port):
            self.config = cfg = cfg.replace(port=port, ha_port=ha_port)
            self.processors.config = cfg
        endpoint = f"inproc://news-{id(self)}"
        self.notify_pull = self._socket(zmq.PULL)
        self.notify_pull.bind(endpoint)
        self.notifier = LoopNotifier(self.ctx, endpoint)
        self.flush_service = make_flush_service(self.store, cfg, self.notifier.flushed)
        self.zk = zkutil.connect(cfg.zookeeper, session_timeout_ms=cfg.zk_session_timeout_ms)
        self.registry = BrokerRegistry(self.zk, cfg, self.member_info,
                                       lambda: self.store.commitlog.max_offset)
        self.registry.epoch = self.store.epoch_file.read()
        self.registry.register()
        self._services = [self.flush_service,
                          PeriodicService("checkpoint", cfg.checkpoint_interval_ms / 1000,
                                          self.store.checkpoint),
                          PeriodicService("offset-persist", cfg.offset_persist_interval_ms / 1000,
                                          self.offsets.persist),
                          # offsets and lag in the member node, for status and elections
                          PeriodicService("member-info", MEMBER_INFO_INTERVAL_S,
                                          self.registry.update_info)]
        for s in self._services:
            s.start()
        self.controller = HaController(self.zk, cfg, self.registry,
                                       lambda: self.store.commitlog.max_offset,
                                       self.store.epoch_file.read, self.notifier.post)
        self.controller.start()
        self._update_visible()
        log.info("broker %s/%d serving at %s (%s, %s replication, pid %d); role from ZooKeeper",
                 cfg.group, cfg.broker_id, cfg.address, cfg.flush.value, cfg.replication.value,
                 os.getpid())

    def _socket(self, kind) -> zmq.Socket:
        sock = self.ctx.socket(kind)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVHWM, 100_000)
        sock.setsockopt(zmq.SNDHWM, 100_000)
        return sock

    def member_info(self) -> dict:
        cfg = self.config
        info = {"group": cfg.group, "broker_id": cfg.broker_id, "address": cfg.address,
                "ha_address": cfg.ha_address, "role": self.role, "flush": cfg.flush.value,
                "replication": cfg.replication.value, "max_ack_wait_ms": cfg.max_ack_wait_ms,
                "pid": os.getpid(), "version": __version__,
                "data_dir": os.path.abspath(cfg.data_dir),
                "max_offset": self.store.commitlog.max_offset,
                "confirmed_offset": self.visible_offset, "promotable": cfg.promotable}
        if self.ha_client is not None:
            info["master_max_offset"] = self.ha_client.master_max
            info["lag_bytes"] = self.replication_lag()
        return info

    def replication_lag(self) -> int:
        """A slave: bytes its master holds that it does not (as last heard)."""
        return max(0, self.ha_client.master_max - self.store.commitlog.max_offset) \
            if self.ha_client is not None else 0

    def stop(self) -> None:
        self._stop.set()

    def install_signal_handlers(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self.stop())

    def _shutdown(self) -> None:
        log.info("broker stopping")
        if self.controller is not None:
            self.controller.stop()
        if self.registry is not None:
            self.registry.close()
        self._stop_following()
        for s in self._services:
            s.shutdown()
        self._drain_notifications()
        self._release_waiters()
        for w in self.ack_waiters.drain():
            self._reply(w.identity, w.request_id, w.type, pb.SERVICE_NOT_AVAILABLE,
                        "broker shut down before the send was durable; it is stored", None)
        self.offsets.persist(force=True)
        self.store.close()
        zkutil.close(self.zk)
        self.notifier.close()
        for sock in (self.router, self.ha_router, self.notify_pull):
            sock.close(linger=0)
        self.ctx.term()
        log.info("broker stopped")

    # ------------------------------------------------------------ state for processors
    def hosted_queues(self, topic: str) -> int | None:
        return self.registry.topics.get(topic) if self.registry else None

    def health(self) -> BrokerHealth:
        following = self.ha_client is not None
        heard = self.ha_client.last_received if following else 0.0
        return BrokerHealth(
            role=self.role, following=following,
            lease_valid=self.controller is not None and self.controller.lease_valid(),
            draining=self.draining, epoch=self.registry.epoch if self.registry else 0,
            lag_bytes=self.replication_lag(),
            master_silent_s=time.monotonic() - heard if heard else -1.0)

    def writable(self) -> bool:
        return self.role == MASTER and not self.draining and self.controller.lease_valid()

    def not_writable_reason(self) -> str:
        if self.role != MASTER:
            return f"broker {self.config.group}/{self.config.broker_id} is a slave; the " \
                   f"master is at {self.registry.master_address() or 'unknown'}"
        if self.draining:
            return "the master is handing over to a slave (planned switchover)"
        return "the master's ZooKeeper lease has lapsed: not accepting writes"

    def slaves_available(self) -> bool:
        return self.ha is not None and self.ha.slaves_available()

    def ack_waiter(self, end_offset, identity, request_id, resp, type_: int = pb.SEND) -> bool:
        """Register a write (a send, a send back) that waits for its
        conditions; False when none applies."""
        if not (self.sync_flush or self.sync_replication):
            return False
        now = time.monotonic()
        cfg = self.config
        self.ack_waiters.add(AckWaiter(
            end_offset,
            now + cfg.sync_flush_timeout_ms / 1000 if self.sync_flush else NEVER,
            now + cfg.slave_timeout_ms / 1000 if self.sync_replication else NEVER,
            identity, request_id, resp, type_))
        return True

    # ------------------------------------------------------------ serving loop
    def serve_forever(self) -> None:
        poller = zmq.Poller()
        router, ha_router, notify = self.router, self.ha_router, self.notify_pull
        for sock in (router, ha_router, notify):
            poller.register(sock, zmq.POLLIN)
        try:
            while not self._stop.is_set():
                events = dict(poller.poll(int(HOUSEKEEPING_S * 1000)))
                if notify in events:
                    self._drain_notifications()
                if ha_router in events:
                    self._drain_ha()
                if router in events:
                    if self.role == SLAVE:
                        self._update_visible()   # replication moved it without waking us
                    self._drain_router()
                if self.appended:
                    self.appended = False
                    if self.sync_flush:
                        self.flush_service.wakeup()
                self._pump_schedule()
                self._update_visible()   # first: transfers carry the newest confirmed offset
                if self.ha is not None:
                    self.ha.pump(time.monotonic())
                self._housekeeping()
        finally:
            self._shutdown()

    def _pump_schedule(self) -> None:
        """Deliver delayed messages that came due (a master taking writes)."""
        now = time.monotonic()
        if self.schedule is None or now < self._next_schedule or not self.writable():
            return
        self._next_schedule = now + SCHEDULE_INTERVAL_S
        if self.schedule.pump(time.time_ns() // 1_000_000, self.visible_offset):
            self.appended = True

    def _drain_router(self) -> None:
        router = self.router
        for _ in range(MAX_DRAIN):
            try:
                parts = router.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            self._handle(parts)

    def _drain_ha(self) -> None:
        now = time.monotonic()
        for _ in range(MAX_DRAIN):
            try:
                parts = self.ha_router.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            if len(parts) == 2 and self.ha is not None:
                self.ha.on_message(parts[0], parts[1], now)

    def _handle(self, parts: list[bytes]) -> None:
        identity = parts[0]
        if len(parts) != 2:
            self.bad_requests += 1
            self._reply(identity, 0, 0, pb.BAD_REQUEST,
                        f"expected one frame per request, got {len(parts) - 1}", None)
            return
        try:
            frame = codec.decode_frame(parts[1])
            request_id, type_ = frame.request_id, frame.type
            if type_ not in self.handlers:
                raise codec.FrameError(pb.UNKNOWN_REQUEST_TYPE,
                                       f"request type {type_} is not served on this socket",
                                       request_id, type_)
            request = codec.decode_request(frame)
        except codec.FrameError as exc:
            self.bad_requests += 1
            self._reply(identity, exc.request_id, exc.type, exc.status, str(exc), None)
            return
        result = self._call(self.handlers[type_], identity, request_id, type_, request)
        if result is not None:
            status, error, message = result
            if status in REJECTED:
                self.bad_requests += 1
            elif type_ == pb.SEND and not (self.sync_flush or self.sync_replication):
                # acked at once: visible before the next request in this drain
                self._update_visible()
            self._reply(identity, request_id, type_, status, error, message)

    def _call(self, handler, identity, request_id: int, type_: int, request):
        """The one place a request is handled: a handler's answer, or the
        status of what it raised (``errors.answer_for``)."""
        try:
            return handler(identity, request_id, request)
        except (DuomqError, RecordError) as exc:
            return (*answer_for(exc), None)
        except Exception as exc:  # a bug must not take the broker down
            log.exception("request %d (type %d) failed", request_id, type_)
            return (*answer_for(exc), None)

    def _reply(self, identity, request_id, type_, status, error, message) -> None:
        try:
            self.router.send_multipart(
                [identity, codec.encode_response(request_id, type_, status, error, message)],
                zmq.NOBLOCK)
        except zmq.ZMQError:
            log.debug("client %s gone; answer dropped", identity.hex())

    # ------------------------------------------------------------ news from other threads
    def _drain_notifications(self) -> None:
        while True:
            try:
                kind, a, b = _NOTE.unpack(self.notify_pull.recv(zmq.NOBLOCK))
            except zmq.Again:
                return
            if kind == b"f":
                self.flushed_offset = max(self.flushed_offset, a)
            elif kind == b"w":
                pass   # the loop's _update_visible reads what moved
            elif kind == b"P":
                self._promote(a)
            elif kind == b"F":
                self._follow(a, b)
            elif kind == b"D":
                self._demote("ZooKeeper session lost or master node gone")
            elif kind == b"H":
                self._drain_for_handover()

    def _update_visible(self) -> None:
        """Recompute the replicated and visible offsets; answer what they allow."""
        end = self.store.dispatched_offset
        if self.role == MASTER:
            if self.ha is not None:
                replicated = self.ha.replicated_offset()
                self.replicated_offset = replicated if replicated is not None else -1
            visible = end
            if self.sync_flush:
                visible = min(visible, self.flushed_offset)
            if self.sync_replication:
                visible = min(visible, max(0, self.replicated_offset))
            self._release_waiters()
        else:
            visible = min(end, self.master_confirmed)
        if visible > self.visible_offset:
            self.visible_offset = visible
            if self.pull_hold.held:
                self._answer_pulls(self.pull_hold.take_ready(self._visible_max))

    def _conditions(self) -> tuple[float, float]:
        return (self.flushed_offset if self.sync_flush else NEVER,
                self.replicated_offset if self.sync_replication else NEVER)

    def _release_waiters(self) -> None:
        if not self.controller.lease_valid():
            return   # a successor may exist: ack nothing until the lease is back
        for w in self.ack_waiters.release(*self._conditions()):
            self._reply(w.identity, w.request_id, w.type, pb.OK, "", w.response)

    def _visible_max(self, topic: str, queue_id: int) -> int:
        cq = self.store.find_queue(topic, queue_id)
        return self.store.visible_max_offset(cq, self.visible_offset) if cq else 0

    def _answer_pulls(self, pulls) -> None:
        for p in pulls:
            result = self._call(self.processors.pull_held, p.identity, p.request_id, pb.PULL,
                                p.request)
            self._reply(p.identity, p.request_id, pb.PULL, *result)

    # ------------------------------------------------------------ timers
    def _housekeeping(self) -> None:
        """Deadlines every iteration (a front check); scans of held pulls and
        replication links every HOUSEKEEPING_S, not once per drained batch."""
        now = time.monotonic()
        for w, status in self.ack_waiters.expire(now, *self._conditions()):
            what = ("not flushed within sync_flush_timeout_ms "
                    f"({self.config.sync_flush_timeout_ms} ms)") if status == pb.FLUSH_DISK_TIMEOUT \
                else (f"not replicated to {self.config.sync_replicas} slave(s) within "
                      f"slave_timeout_ms ({self.config.slave_timeout_ms} ms)")
            self._reply(w.identity, w.request_id, w.type, status, what + "; the message is stored",
                        w.response)
        if now < self._next_scan:
            return
        self._next_scan = now + HOUSEKEEPING_S
        if self.pull_hold.held:
            self._answer_pulls(self.pull_hold.take_expired(now))
        if self.ha is not None:
            self.ha.housekeeping(now)
            self.controller.request_isr(set(self.ha.in_sync_ids()))
            if self.draining:
                self._drain_for_handover()
        if now >= self._next_retention:
            self._next_retention = now + self.config.retention_check_interval_ms / 1000
            self._retention()
            stale = [cid for cid, (seen, *_) in self.clients.items() if now - seen > CLIENT_EXPIRY_S]
            for cid in stale:
                del self.clients[cid]

    def _retention(self) -> None:
        cfg = self.config
        floor = self.min_consumed_physical() if cfg.retention_wait_for_consumers else None
        try:
            with self.store._cq_lock:
                self.store.delete_expired(cfg.file_reserved_hours, floor)
        except OSError:
            log.exception("retention failed")

    def min_consumed_physical(self) -> int | None:
        """Lowest commit-log offset some consumer group still needs."""
        floor = None
        for (_group, topic, qid), off in self.offsets.items():
            phys = self.store.physical_at(topic, qid, off)
            if phys is not None and (floor is None or phys < floor):
                floor = phys
        return floor


def run_broker(config: BrokerConfig) -> None:
    broker = Broker(config)
    broker.install_signal_handlers()
    broker.start()
    broker.serve_forever()
