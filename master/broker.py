"""The broker process: one serving thread owns the client ROUTER socket, the
store's write path, long polling and the sends waiting for their flush.

Flush threads report the flushed offset over an inproc socket; the serving
thread then answers the sends it covers and wakes held pulls. Consumers see
messages up to ``visible_offset``: the flushed offset under SYNC_FLUSH (so no
consumer reads what a crash could take back), the written offset otherwise.
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
from duomq.common.config import BrokerConfig, FlushDiskType
from duomq.common.service import ServiceThread
from duomq.coordinator import zk as zkutil
from duomq.coordinator.registry import BrokerRegistry
from duomq.flush import CheckpointService, make_flush_service
from duomq.master.ack_waiters import AckWaiters
from duomq.master.offsets import ConsumerOffsetManager
from duomq.master.processors import Processors
from duomq.master.pull_hold import PullRequestHoldService
from duomq.proto import codec, pb
from duomq.store import MessageStore

log = logging.getLogger(__name__)
_OFFSET = struct.Struct(">q")
MAX_DRAIN = 512              # client messages handled before looking at flush news
HOUSEKEEPING_S = 0.05
CLIENT_EXPIRY_S = 120        # a client not heard from this long is forgotten
# answers that mean the request itself was wrong: counted in bad_requests
REJECTED = frozenset({pb.BAD_REQUEST, pb.INVALID_NAME, pb.MESSAGE_TOO_LARGE, pb.TOPIC_NOT_EXIST,
                      pb.UNSUPPORTED_VERSION, pb.UNKNOWN_REQUEST_TYPE})


class LoopNotifier:
    """Lets any thread post a flushed offset to the serving thread (one PUSH
    socket per thread: ZeroMQ sockets are not shared between threads)."""

    def __init__(self, ctx: zmq.Context, endpoint: str):
        self.ctx = ctx
        self.endpoint = endpoint
        self._local = threading.local()
        self._sockets = []

    def __call__(self, offset: int) -> None:
        sock = getattr(self._local, "sock", None)
        if sock is None:
            sock = self._local.sock = self.ctx.socket(zmq.PUSH)
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(self.endpoint)
            self._sockets.append(sock)
        sock.send(_OFFSET.pack(offset))

    def close(self):
        for s in self._sockets:
            s.close(linger=0)


class OffsetPersistService(ServiceThread):
    name = "offset-persist"

    def __init__(self, offsets: ConsumerOffsetManager, interval_ms: int):
        super().__init__()
        self.offsets = offsets
        self.interval_s = interval_ms / 1000

    def run(self):
        while not self.stopped:
            self.wait_for_running(self.interval_s)
            try:
                self.offsets.persist()
            except OSError:
                log.exception("persisting consumer offsets failed")


class Broker:
    role = "MASTER"

    def __init__(self, config: BrokerConfig):
        self.config = config
        self.store = MessageStore(config)
        self.offsets = ConsumerOffsetManager(os.path.join(config.data_dir, "consumer_offsets.json"))
        self.pull_hold = PullRequestHoldService()
        self.ack_waiters = AckWaiters()
        self.sync_flush = config.flush is FlushDiskType.SYNC_FLUSH
        self.flushed_offset = 0
        self.visible_offset = 0
        self.appended = False
        self.bad_requests = 0
        self.clients: dict[str, tuple] = {}
        self.ctx = zmq.Context()
        self.router = None
        self.notify_pull = None
        self.zk = None
        self.registry: BrokerRegistry | None = None
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
        }
        self._services: list[ServiceThread] = []
        self._next_retention = 0.0

    # ------------------------------------------------------------ lifecycle
    def start(self) -> None:
        cfg = self.config
        report = self.store.start()
        log.info("%s", report)
        self.offsets.load()
        self.flushed_offset = self.store.commitlog.mfq.flushed_offset()
        self.visible_offset = self.flushed_offset if self.sync_flush else self.store.dispatched_offset
        self.router = self.ctx.socket(zmq.ROUTER)
        self.router.setsockopt(zmq.LINGER, 0)
        self.router.setsockopt(zmq.RCVHWM, 100_000)
        self.router.setsockopt(zmq.SNDHWM, 100_000)
        if cfg.port == 0:
            port = self.router.bind_to_random_port(f"tcp://{cfg.listen_host}")
            self.config = cfg = cfg.replace(port=port)
            self.processors.config = cfg
        else:
            self.router.bind(f"tcp://{cfg.listen_host}:{cfg.port}")
        endpoint = f"inproc://flush-{id(self)}"
        self.notify_pull = self.ctx.socket(zmq.PULL)
        self.notify_pull.setsockopt(zmq.LINGER, 0)
        self.notify_pull.bind(endpoint)
        self.notifier = LoopNotifier(self.ctx, endpoint)
        self.flush_service = make_flush_service(self.store, cfg, self.notifier)
        self._services = [self.flush_service,
                          CheckpointService(self.store, cfg.checkpoint_interval_ms),
                          OffsetPersistService(self.offsets, cfg.offset_persist_interval_ms)]
        for s in self._services:
            s.start()
        self.zk = zkutil.connect(cfg.zookeeper, session_timeout_ms=cfg.zk_session_timeout_ms)
        self.registry = BrokerRegistry(self.zk, cfg, self.member_info,
                                       lambda: self.store.commitlog.max_offset)
        self.registry.register()
        log.info("broker %s/%d serving at %s (%s, pid %d)", cfg.group, cfg.broker_id,
                 cfg.address, cfg.flush.value, os.getpid())

    def member_info(self) -> dict:
        cfg = self.config
        return {"group": cfg.group, "broker_id": cfg.broker_id, "address": cfg.address,
                "role": self.role, "flush": cfg.flush.value, "replication": cfg.replication.value,
                "max_ack_wait_ms": cfg.max_ack_wait_ms, "pid": os.getpid(),
                "version": __version__, "data_dir": os.path.abspath(cfg.data_dir)}

    def stop(self) -> None:
        self._stop.set()

    def install_signal_handlers(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self.stop())

    def _shutdown(self) -> None:
        log.info("broker stopping")
        if self.registry is not None:
            self.registry.close()
        for s in self._services:
            s.shutdown()
        self._drain_notifications()
        self._release_waiters()
        for w in self.ack_waiters.drain():
            self._reply(w.identity, w.request_id, pb.SEND, pb.SERVICE_NOT_AVAILABLE,
                        "broker shutting down before the flush", None)
        self.offsets.persist(force=True)
        self.store.close()
        zkutil.close(self.zk)
        self.notifier.close()
        self.router.close(linger=0)
        self.notify_pull.close(linger=0)
        self.ctx.term()
        log.info("broker stopped")

    # ------------------------------------------------------------ state for processors
    def hosted_queues(self, topic: str) -> int | None:
        return self.registry.topics.get(topic) if self.registry else None

    def writable(self) -> bool:
        return self.registry is not None and self.registry.session_ok.is_set()

    def not_writable_reason(self) -> str:
        return "broker's ZooKeeper session is not established: not accepting writes"

    # ------------------------------------------------------------ serving loop
    def serve_forever(self) -> None:
        poller = zmq.Poller()
        poller.register(self.router, zmq.POLLIN)
        poller.register(self.notify_pull, zmq.POLLIN)
        router, notify = self.router, self.notify_pull
        try:
            while not self._stop.is_set():
                events = dict(poller.poll(self._poll_timeout_ms()))
                if notify in events:
                    self._drain_notifications()
                if router in events:
                    self._drain_router()
                if self.appended:
                    self.appended = False
                    if self.sync_flush:
                        self.flush_service.wakeup()
                    else:
                        self._advance_visible(self.store.dispatched_offset)
                self._housekeeping()
        finally:
            self._shutdown()

    def _poll_timeout_ms(self) -> int:
        return int(HOUSEKEEPING_S * 1000)

    def _drain_router(self) -> None:
        router = self.router
        for _ in range(MAX_DRAIN):
            try:
                parts = router.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            self._handle(parts)

    def _handle(self, parts: list[bytes]) -> None:
        identity = parts[0]
        if len(parts) != 2:
            self.bad_requests += 1
            self._reply(identity, 0, 0, pb.BAD_REQUEST,
                        f"expected one frame per request, got {len(parts) - 1}", None)
            return
        request_id = type_ = 0
        try:
            frame = codec.decode_frame(parts[1])
            request_id, type_ = frame.request_id, frame.type
            request = codec.decode_request(frame)
            result = self.handlers[type_](identity, request_id, request)
        except codec.FrameError as exc:
            self.bad_requests += 1
            self._reply(identity, exc.request_id, exc.type, exc.status, str(exc), None)
            return
        except Exception as exc:  # a bug must not take the broker down
            self.bad_requests += 1
            log.exception("request %d (type %d) failed", request_id, type_)
            self._reply(identity, request_id, type_, pb.SYSTEM_ERROR,
                        f"{type(exc).__name__}: {exc}", None)
            return
        if result is not None:
            status, error, message = result
            if status in REJECTED:
                self.bad_requests += 1
            self._reply(identity, request_id, type_, status, error, message)

    def _reply(self, identity, request_id, type_, status, error, message) -> None:
        try:
            self.router.send_multipart(
                [identity, codec.encode_response(request_id, type_, status, error, message)],
                zmq.NOBLOCK)
        except zmq.ZMQError:
            log.debug("client %s gone; answer dropped", identity.hex())

    # ------------------------------------------------------------ flush news
    def _drain_notifications(self) -> None:
        newest = None
        while True:
            try:
                raw = self.notify_pull.recv(zmq.NOBLOCK)
            except zmq.Again:
                break
            newest = _OFFSET.unpack(raw)[0]
        if newest is not None and newest > self.flushed_offset:
            self.flushed_offset = newest
            if self.sync_flush:
                self._release_waiters()
                self._advance_visible(newest)

    def _release_waiters(self) -> None:
        for w in self.ack_waiters.release(self.flushed_offset):
            self._reply(w.identity, w.request_id, pb.SEND, pb.OK, "", w.response)

    def _advance_visible(self, offset: int) -> None:
        if offset <= self.visible_offset:
            return
        self.visible_offset = offset
        if len(self.pull_hold.held):
            self._answer_pulls(self.pull_hold.take_ready(self._visible_max))

    def _visible_max(self, topic: str, queue_id: int) -> int:
        cq = self.store.find_queue(topic, queue_id)
        return self.store.visible_max_offset(cq, self.visible_offset) if cq else 0

    def _answer_pulls(self, pulls, held: bool = False) -> None:
        for p in pulls:
            try:
                result = self.processors.pull(p.identity, p.request_id, p.request, held=True)
            except Exception as exc:
                log.exception("held pull failed")
                result = (pb.SYSTEM_ERROR, str(exc), None)
            self._reply(p.identity, p.request_id, pb.PULL, *result)

    # ------------------------------------------------------------ timers
    def _housekeeping(self) -> None:
        now = time.monotonic()
        for w in self.ack_waiters.expire(now):
            self._reply(w.identity, w.request_id, pb.SEND, pb.FLUSH_DISK_TIMEOUT,
                        f"not flushed within sync_flush_timeout_ms "
                        f"({self.config.sync_flush_timeout_ms} ms); the message is stored",
                        w.response)
        if self.pull_hold.held:
            self._answer_pulls(self.pull_hold.take_expired(now))
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
        for (group, topic, qid), off in self.offsets.items():
            phys = self.store.physical_at(topic, qid, off)
            if phys is not None and (floor is None or phys < floor):
                floor = phys
        return floor


def run_broker(config: BrokerConfig) -> None:
    broker = Broker(config)
    broker.install_signal_handlers()
    broker.start()
    broker.serve_forever()
