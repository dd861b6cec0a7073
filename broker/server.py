"""The broker process: one serving thread owns the client ROUTER socket, the
replication ROUTER socket, the store's write path (as master), long polling
and the sends waiting for their durability conditions.

A broker plays one role at a time, whose parts it holds (``master.parts``,
``slave.parts``). As master it appends sends, streams its log to slaves and
acks a send once its flush (SYNC_FLUSH) and its replication (SYNC)
conditions hold (``visibility``); as slave it follows the master, serves
read-only pulls and answers writes with NOT_MASTER. The HA controller
(``controller.ha_controller``) decides the role and sends typed orders
through the inbox (``inbox``); this thread carries them out
(``role_switch``) and publishes what it is as a snapshot (``snapshot``),
which the controller, the member-info writer and metrics scrapes read.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import resource
import signal
import threading
import time
from typing import Any

import zmq

from duomq.broker import role_switch, visibility
from duomq.broker.core import BrokerCore
from duomq.broker.dispatcher import Dispatcher
from duomq.broker.inbox import Inbox, ScrapeWanted
from duomq.broker.metrics import BrokerCollector, metrics_endpoint, serve
from duomq.broker.outbox import PIPE_MESSAGES, Outbox
from duomq.broker.processors import HANDLERS
from duomq.broker.security import BrokerSecurity, refuse_plaintext_in_secured_cluster
from duomq.broker.snapshot import QueueSnapshot, take, take_queues
from duomq.common.config import BrokerConfig
from duomq.common.endpoint import EXPOSED, exposed_without_auth
from duomq.common.errors import ConfigError
from duomq.common.gc_pauses import GcWatch
from duomq.common.grace import STOP_S
from duomq.common.service import PeriodicService, ServiceThread
from duomq.controller.ha_controller import HaController
from duomq.controller.registry import BrokerRegistry
from duomq.coordinator import zk as zkutil
from duomq.coordinator.zk_login import broker_zk_sasl
from duomq.flush import make_flush_service
from duomq.format import native
from duomq.proto import pb
from duomq.share import handlers as share
from duomq.transport.busy_poll import BusyPoll
from duomq.transport.ports import Port, PortError, listening, poller_for
from duomq.transport.zsend import readable

log = logging.getLogger(__name__)
MAX_DRAIN = 512              # client messages handled before looking at other news
CLIENT_EXPIRY_S = 120        # a client not heard from this long is forgotten
MEMBER_INFO_INTERVAL_S = 1.0  # refresh of this broker's member node
SCRAPE_WAIT_S = 2.0          # a scrape waits this long for the per-queue snapshot
CLIENT_RCVHWM = 64           # requests ZeroMQ queues per client before TCP pushes back
HA_HWM = 16                  # messages queued per replication link, each way: at most 16
                             # chunks of ha_transfer_batch_bytes wait for a slave that
                             # does not read
HA_MAX_FRAME_BYTES = 64 * 1024  # slaves send only reports
EXIT_STOP_OVERDUE = 3        # the exit status of a stop its watchdog ended


def poll_ms(now: float, due: float | None, most_s: float) -> int:
    """A poll's timeout in whole ms that wakes no earlier than ``due``
    (monotonic s; None: nothing due) nor later than ``most_s`` from now."""
    most = int(most_s * 1000)
    if due is None:
        return most
    return max(0, min(most, math.ceil((due - now) * 1000)))


class Broker(BrokerCore):
    """The broker process (see the module docstring)."""

    def __init__(self, config: BrokerConfig):
        super().__init__(config)
        self.ctx = zmq.Context()
        # memory per peer is bounded on both ports: frames by MAXMSGSIZE, what
        # ZeroMQ queues by the high-water marks (in messages), answers a client
        # does not read by the outbox (in bytes), log bytes in flight to a slave
        # by ha_window_bytes
        self.router: Port = listening(self.ctx, config.native_client_port, CLIENT_RCVHWM,
                                      PIPE_MESSAGES, config.max_frame_bytes,
                                      authenticated=config.auth)
        # the log leaves from the serving thread itself when native
        self.ha_router: Port = listening(self.ctx, config.native_ha_port, HA_HWM, HA_HWM,
                                         HA_MAX_FRAME_BYTES, peer="slave")
        # auth = true: CURVE on both ports (libzmq's: the config refuses native
        # ports with auth), ZAP, the users (broker/security.py)
        self.security: BrokerSecurity | None = None
        if config.auth:
            client, ha = self.router.libzmq, self.ha_router.libzmq
            assert client is not None and ha is not None
            self.security = BrokerSecurity(config, self.ctx, client, ha)
        # a SASL login to the ensemble, where it asks for one
        self.zk_sasl = broker_zk_sasl(config.zookeeper_sasl_file,
                                      config.auth_dir if config.auth else "")
        if self.security is not None:
            self.public_key = self.security.keys.public.decode()
        self.inbox = Inbox()
        self.outbox = Outbox(self.router, config.max_queued_bytes_per_client,
                             config.client_mute_ms / 1000)
        self.answers.bind(self.outbox, functools.partial(visibility.recompute, self))
        if self.security is not None:
            self.guard = self.security.guard
        # when an ASYNC send's visible offsets are computed (its ack's hook)
        self.dispatcher = Dispatcher(self, self.outbox, HANDLERS,
                                     functools.partial(visibility.before_answer, self),
                                     guard=self.guard)
        self.busy_poll = self.metrics.busy_poll = BusyPoll(config.busy_poll_us)
        self.zk = None
        self.metrics_server: Any = None     # prometheus_client's WSGI server
        self.controller: HaController | None = None
        self._stopping = False
        self._watchdog: threading.Timer | None = None
        self._services: list[ServiceThread] = []
        self._next_retention = 0.0
        self._next_scan = 0.0
        self.queue_snapshot: QueueSnapshot | None = None     # the last a scrape asked for
        self._told_controller: tuple | None = None

    # ------------------------------------------------------------ lifecycle
    def _bind(self, port: Port, number: int, setting: str) -> int:
        host = self.config.listen_host
        try:
            return port.bind(host, number)
        except PortError as exc:
            raise ConfigError(f"{setting} {number}: cannot listen on {host}: {exc}") from None

    def start(self) -> None:
        cfg = self.config
        t0 = time.monotonic()
        log.info("%s", self.store.start())
        self.metrics.recovery_seconds = time.monotonic() - t0
        self.offsets.load()
        self.timer_indexer.check(self.store)     # a tail the recovery cut: indexed again
        self.state.flushed_offset = self.store.commitlog.mfq.flushed_offset()
        self.state.epoch = self.store.epoch_file.read()
        if self.security is not None:
            self.security.start_zap()
        port = self._bind(self.router, cfg.port, "port")
        ha_port = self._bind(self.ha_router, cfg.ha_port, "ha_port")
        if (port, ha_port) != (cfg.port, cfg.ha_port):
            self.config = cfg = cfg.replace(port=port, ha_port=ha_port)
        self.publish()
        if cfg.metrics_port >= 0:        # scraped on prometheus_client's own thread
            collector = BrokerCollector(cfg, self.metrics, lambda: self.snapshot,
                                        self.queues_for_scrape)
            host, token = metrics_endpoint(cfg)
            self.metrics_server, metrics_port = serve(collector, host, cfg.metrics_port, token)
            if metrics_port != cfg.metrics_port:
                self.config = cfg = cfg.replace(metrics_port=metrics_port)
                collector.config = cfg
            log.info("metrics on http://%s:%d/metrics%s", host, metrics_port,
                     " (a bearer token: auth_dir/metrics.token)" if token else "")
        self.flush_service = make_flush_service(self.store, cfg, self.inbox.flushed,
                                                self.metrics.fsync.observe)
        self.zk = zkutil.connect(cfg.zookeeper, session_timeout_ms=cfg.zk_session_timeout_ms,
                                 access=self.security.zk_access if self.security else None,
                                 sasl=self.zk_sasl)
        if self.security is not None:
            self.security.start(self.zk)        # users known before the member node says "here"
            self.group_nodes = self.security.group_nodes
        else:
            refuse_plaintext_in_secured_cluster(self.zk, cfg.cluster)
        self.registry = registry = BrokerRegistry(self.zk, cfg, self.member_info)
        self.hosted_topics = lambda: registry.topics
        registry.register()
        self._services = [self.flush_service,
                          PeriodicService("checkpoint", cfg.checkpoint_interval_ms / 1000,
                                          lambda: self.store.checkpoint(thorough=False)),
                          PeriodicService("offset-persist", cfg.offset_persist_interval_ms / 1000,
                                          self.offsets.persist),
                          # offsets and lag in the member node, for status and elections
                          PeriodicService("member-info", MEMBER_INFO_INTERVAL_S,
                                          registry.update_info)]
        for s in self._services:
            s.start()
        self.controller = HaController(self.zk, cfg, registry, lambda: self.snapshot,
                                       self.inbox.post)
        self.controller.start()
        visibility.update_visible(self)
        # the start-up heap out of the garbage collector's walks (common/gc_pauses.py)
        self.metrics.gc = watch = GcWatch()
        watch.install()
        log.info("froze %d objects of the start-up heap (the garbage collector skips them)",
                 watch.freeze())
        log.info("broker %s/%d serving at %s (%s, %s replication, pid %d, records checked by %s); "
                 "role from ZooKeeper", cfg.group, cfg.broker_id, cfg.address, cfg.flush.value,
                 cfg.replication.value, os.getpid(), native.describe())
        if exposed_without_auth(cfg.auth, cfg.listen_host):
            log.warning("broker %s/%d " + EXPOSED.format(where=f"{cfg.listen_host}:{cfg.port}"),
                        cfg.group, cfg.broker_id)

    def stop(self) -> None:
        """Ask the loop to stop (any thread, or a signal handler)."""
        self._stopping = True

    def install_signal_handlers(self) -> None:
        """SIGTERM and SIGINT stop the broker, within ``grace.STOP_S``: a
        stop that hangs past it (ZooKeeper gone, a disk that does not
        answer) ends the process there, before the kubelet's SIGKILL takes
        what is left of the pod's grace period. What the broker wrote is in
        the page cache, and a start checks the log (recovery)."""
        def on_signal(*_):
            self.stop()
            if self._watchdog is None:
                self._watchdog = threading.Timer(STOP_S, self._stop_overdue)
                self._watchdog.daemon = True
                self._watchdog.start()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, on_signal)

    def _stop_overdue(self) -> None:
        log.error("broker stop took over %g s (grace.STOP_S): exiting now; the next start "
                  "recovers the store", STOP_S)
        logging.shutdown()
        os._exit(EXIT_STOP_OVERDUE)

    def _shutdown(self) -> None:
        log.info("broker stopping")
        if self.metrics.gc is not None:
            self.metrics.gc.uninstall()
        if self.metrics_server is not None:
            self.metrics_server.shutdown()       # no scrape reads the store past here
            self.metrics_server.server_close()
        if self.controller is not None:
            self.controller.stop()
        if self.registry is not None:
            self.registry.close(master=self.parts.leads)
        for s in self._services:
            s.shutdown()
        self._drain_notifications()
        self.answers.end_turn()             # (a turn that raised left them)
        visibility.release_waiters(self)
        for w, _status, _error in self.parts.stop("the broker shut down"):
            self.answers.reply(w.identity, w.request_id, w.type, pb.SERVICE_NOT_AVAILABLE,
                               "broker shut down before the send was durable; it is stored",
                               None)
        try:
            self.offsets.persist(force=True)
        except OSError as exc:              # a full disk: the last persisted ones stand
            log.error("cannot persist the consumer offsets at stop: %s", exc)
        self.timer_indexer.close()
        self.store.close()
        zkutil.close(self.zk)
        self.inbox.close()
        for sock in (self.router, self.ha_router):
            sock.close(linger=0)
        if self.security is not None:
            self.security.stop()                 # the ZAP handler's sockets, before term
        self.ctx.term()
        log.info("broker stopped")

    # ------------------------------------------------------------ serving loop
    def serve_forever(self) -> None:
        router, ha_router, notify = self.router, self.ha_router, self.inbox
        poller = poller_for(router, ha_router)
        # what poll reports for each port, and messages it read that the loop
        # has not taken yet (a native port's)
        router_key, ha_key = router.poll_key(), ha_router.poll_key()
        for key in (router_key, ha_key):
            poller.register(key, zmq.POLLIN)
        notify_key = notify.fileno()
        poller.register(notify_key, zmq.POLLIN)
        backlogged, ha_backlogged = router.backlogged, ha_router.backlogged
        st = self.state
        busy = self.busy_poll
        events: dict = {}
        try:
            outbox, answers = self.outbox, self.answers
            while not self._stopping:
                if events:
                    busy.spin(router, ha_router, notify)
                events = dict(poller.poll(0 if backlogged() or ha_backlogged()
                                          else self._poll_ms()))
                if events:
                    busy.woke()
                if outbox.waiting:
                    outbox.flush()
                if notify_key in events:
                    self._drain_notifications()
                if ha_key in events or ha_backlogged():
                    self._drain_ha()
                if router_key in events or backlogged():
                    if not self.parts.offsets_move_here:
                        visibility.update_visible(self)   # replication moved it without waking us
                    self._drain_router()
                    if answers.offsets_owed:      # ASYNC: before the transfers, they carry
                        answers.pay()             # the offsets it moved
                if st.appended:
                    st.appended = False
                    # what was just written leaves for the slaves first, before
                    # the rest of the turn (issue 41: under SYNC it waited ~185
                    # us for it, `bench/send_timeline.py`), then the group commit
                    self._replicate()
                    if self.sync_flush and self.flush_service is not None:
                        self._group_commit()
                answers.settle()                  # the last send's queue entries: after those
                self._pump_schedule()
                visibility.update_unless_current(self)   # first: transfers carry the newest
                self._replicate()                        # confirmed offset
                self._housekeeping()
                answers.end_turn()                # acks held to the turn's end
        finally:
            self._shutdown()

    def _poll_ms(self) -> int:
        """How long the loop may sleep: until an answer waiting for its
        peer may go (1 ms), a lingering transfer is due (ha_service), or
        housekeeping."""
        if self.outbox.waiting:
            return 1
        return poll_ms(time.monotonic(), self.parts.linger_due(),
                       self.config.housekeeping_interval_ms / 1000)

    def _group_commit(self) -> None:
        """SYNC_FLUSH: with no other request waiting, this thread's own
        fdatasync (the sends it covers are acked on this turn); else, or
        when the disk is slow or the group-commit thread busy, that thread's."""
        fs = self.flush_service
        if fs is None:
            return
        flushed = None if readable(self.router) else fs.flush_inline()
        if flushed is None:
            fs.wakeup()
        else:
            self.state.flushed_offset = max(self.state.flushed_offset, flushed)

    def _replicate(self) -> None:
        """A master sends its slaves what they lack, and the confirmed offset
        when it moved."""
        self.parts.pump(time.monotonic(), self.state.visible_offset)

    def _pump_schedule(self) -> None:
        """Deliver delayed messages that came due and check transactions back
        (a master taking writes)."""
        now = time.monotonic()
        if self.parts.due_work(now, self.state.visible_offset, self.producers,
                               lambda c, data: self.outbox.send(c, data, now)):
            self.state.appended = True

    def _drain_router(self) -> None:
        dispatch = self.dispatcher.dispatch
        for frames, who in self.router.requests(MAX_DRAIN):
            dispatch(frames, who)

    def _drain_ha(self) -> None:
        now = time.monotonic()
        for _ in range(MAX_DRAIN):
            if not readable(self.ha_router):
                return
            try:
                parts = self.ha_router.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            if len(parts) == 2:
                self.parts.on_replication(parts[0], parts[1], now)

    # ------------------------------------------------------------ news and snapshots
    def _drain_notifications(self) -> None:
        for note in self.inbox.take():
            role_switch.carry_out(self, note)

    def slave_progress(self, confirmed: int) -> None:
        """The replication thread's news after each transfer. The serving thread
        reads the offsets on every loop, so it is woken only when a pull waits
        on them: a wake-up per transfer cost the slave a thread switch per
        send. (That thread sets the offset, then looks for held pulls; this
        thread holds a pull, then reads the offset: one of the two always sees
        the other.)"""
        if self.pull_hold.held:
            self.inbox.wake()

    def publish(self) -> None:
        """Publish what this broker is now (``snapshot.take``); wake the
        controller when something it acts on changed."""
        s = self.snapshot = take(self)
        told = (s.role, s.epoch, s.in_sync_ids, s.acks_possible, s.drained)
        if told != self._told_controller and self.controller is not None:
            self._told_controller = told
            self.controller.wake()

    def publish_queues(self, wanted: ScrapeWanted) -> None:
        """A scrape's per-queue snapshot (``snapshot.take_queues``)."""
        self.queue_snapshot = take_queues(self)
        wanted.done.set()

    def queues_for_scrape(self) -> QueueSnapshot | None:
        """A scrape's thread: the per-queue snapshot, taken by the serving
        thread now (None when it did not answer within SCRAPE_WAIT_S)."""
        wanted = ScrapeWanted()
        self.inbox.post(wanted)
        return self.queue_snapshot if wanted.done.wait(SCRAPE_WAIT_S) else None

    # ------------------------------------------------------------ timers
    def _housekeeping(self) -> None:
        """Deadlines every iteration (a front check); scans of held pulls and
        replication links every ``housekeeping_interval_ms``, not once per
        drained batch."""
        now = time.monotonic()
        visibility.expire_waiters(self, now)
        if now < self._next_scan:
            return
        cfg = self.config
        self._next_scan = now + cfg.housekeeping_interval_ms / 1000
        if self.pull_hold.held:
            visibility.answer_pulls(self, self.pull_hold.take_expired(now))
        share.serve_held(self, now)          # messages visible again, overdue pops
        for identity in self.outbox.expire(now):
            n = self.pull_hold.forget(identity) + self.pop_hold.forget(identity)
            log.info("forgot muted client %s (%d held pulls dropped)", identity.hex(), n)
        self.parts.housekeeping(now, self.store, self.share_follower)
        if not self.parts.leads:                 # (a master indexes before it fires)
            self.timer_indexer.catch_up(self.store)
        if self.parts.draining:
            role_switch.drain_for_handover(self)
        self.publish()
        if now >= self._next_retention:
            self._next_retention = now + cfg.retention_check_interval_ms / 1000
            self._retention()
            stale = [cid for cid, c in self.clients.items() if now - c.seen > CLIENT_EXPIRY_S]
            for cid in stale:
                del self.clients[cid]
            self.usage.expire(now)

    def _retention(self) -> None:
        """Delete expired segments, on the store's writer (this thread, or a
        slave's replication thread: ``parts.on_writer``)."""
        cfg = self.config
        floor = self.min_consumed_physical() if cfg.retention_wait_for_consumers else None
        store, metrics = self.store, self.metrics

        def delete() -> None:
            try:
                metrics.retention_deleted += store.delete_expired(cfg.file_reserved_hours, floor)
            except OSError:
                log.exception("retention failed")
        self.parts.on_writer(delete)

    def min_consumed_physical(self) -> int | None:
        """Lowest commit-log offset some consumer group still needs."""
        floor = None
        for (_group, topic, qid), off in self.offsets.items():
            phys = self.store.physical_at(topic, qid, off)
            if phys is not None and (floor is None or phys < floor):
                floor = phys
        return floor


def raise_open_files_limit() -> int:
    """Raise the soft limit on open files to the hard one, as the JVM does
    for Kafka and RocketMQ brokers: every consume-queue segment holds a file
    descriptor, and a soft limit of 1,024 would stop a broker at about 1,000
    queues. Returns the limit in force (logged)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        want = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the open files limit from %d to %d: %s", soft, want, exc)
    log.info("open files limit %d (each queue's consume-queue segment holds one)", soft)
    return soft


def run_broker(config: BrokerConfig) -> None:
    """Start and serve until stopped. A file the broker cannot use at start
    (``data_dir`` unwritable, a damaged offsets file, a port taken) is a
    ``ConfigError`` naming it: the CLI prints one line and exits 2."""
    raise_open_files_limit()
    try:
        broker = Broker(config)
        broker.install_signal_handlers()
        broker.start()
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        raise ConfigError(f"cannot start (data_dir {config.data_dir}): {where}"
                          f"{exc.strerror or exc}") from None
    broker.serve_forever()
