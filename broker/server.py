"""The broker process: one serving thread owns the client ROUTER socket, the
replication ROUTER socket, the store's write path (as master), long polling
and the sends waiting for their durability conditions.

A broker plays one role at a time. As Role.MASTER it appends sends, streams its
log to slaves (``replication.ha_service``) and acks a send once its flush
(SYNC_FLUSH) and its replication (SYNC) conditions hold. As Role.SLAVE it follows
the master (``replication.ha_client``), serves read-only pulls and answers
writes with NOT_MASTER. The HA controller (``coordinator.ha_controller``)
decides the role and posts its orders as news; this thread carries them out
(``master.roles``, ``slave.roles``) and reports back.

Consumers see messages up to ``visible_offset``: on a master the flushed
offset under SYNC_FLUSH and the offset ``sync_replicas`` slaves hold under
SYNC replication (so no consumer reads what a crash or a failover could take
back); on a slave, what it holds, capped at what its master lets consumers see.
"""

from __future__ import annotations

import logging
import os
import resource
import signal
import time
from typing import Any

import zmq

from duomq.broker.core import BrokerCore
from duomq.broker.dispatcher import Dispatcher
from duomq.broker.metrics import serve
from duomq.broker.news import LoopNotifier, read_notes
from duomq.broker.outbox import PIPE_MESSAGES, Outbox
from duomq.broker.processors import HANDLERS, pull_held, pull_many_held
from duomq.broker.requests import Request
from duomq.broker.security import BrokerSecurity, refuse_plaintext_in_secured_cluster
from duomq.common.config import BrokerConfig
from duomq.common.credentials import broker_zk_sasl
from duomq.common.errors import ConfigError
from duomq.common.role import Role
from duomq.common.service import PeriodicService, ServiceThread
from duomq.coordinator import zk as zkutil
from duomq.coordinator.ha_controller import HaController
from duomq.coordinator.registry import BrokerRegistry
from duomq.flush import make_flush_service
from duomq.format import native
from duomq.master import roles as master_roles
from duomq.master.ack_waiters import NEVER
from duomq.master.group_topics import GroupTopics
from duomq.proto import pb
from duomq.replication.ha_client import LinkCurve
from duomq.slave import roles as slave_roles

log = logging.getLogger(__name__)
MAX_DRAIN = 512              # client messages handled before looking at other news
HOUSEKEEPING_S = 0.05
SCHEDULE_INTERVAL_S = 0.02   # how often due delayed messages are looked for
TX_CHECK_ROUND_S = 1.0      # how often pending transactions are looked at for check-backs
CLIENT_EXPIRY_S = 120        # a client not heard from this long is forgotten
MEMBER_INFO_INTERVAL_S = 1.0  # refresh of this broker's member node
CLIENT_RCVHWM = 64           # requests ZeroMQ queues per client before TCP pushes back
HA_HWM = 16                  # messages queued per replication link, each way: at most 16
                             # chunks of ha_transfer_batch_bytes wait for a slave that
                             # does not read
HA_MAX_FRAME_BYTES = 64 * 1024  # slaves send only reports


class Broker(BrokerCore):
    """The broker process (see the module docstring)."""

    def __init__(self, config: BrokerConfig):
        super().__init__(config)
        self.ctx = zmq.Context()
        # memory per peer is bounded on both ports: frames by MAXMSGSIZE, what
        # ZeroMQ queues by the high-water marks (in messages), answers a client
        # does not read by the outbox (in bytes), log bytes in flight to a slave
        # by ha_window_bytes
        self.router = self._socket(zmq.ROUTER, rcvhwm=CLIENT_RCVHWM, sndhwm=PIPE_MESSAGES,
                                   max_frame=config.max_frame_bytes)
        self.router.setsockopt(zmq.ROUTER_MANDATORY, 1)      # a full pipe raises: the outbox
        self.ha_router = self._socket(zmq.ROUTER, rcvhwm=HA_HWM, sndhwm=HA_HWM,
                                      max_frame=HA_MAX_FRAME_BYTES)
        self.ha_router.setsockopt(zmq.ROUTER_MANDATORY, 1)   # never drop log bytes silently
        # auth = true: CURVE on both ports, ZAP, the users (broker/security.py)
        self.security = BrokerSecurity(config, self.ctx, self.router, self.ha_router) \
            if config.auth else None
        # a SASL login to the ensemble, where it asks for one
        self.zk_sasl = broker_zk_sasl(config.zookeeper_sasl_file,
                                      config.auth_dir if config.auth else "")
        if self.security is not None:
            self.public_key = self.security.keys.public.decode()
        self.notify_pull = self._socket(zmq.PULL)
        endpoint = f"inproc://news-{id(self)}"
        self.notify_pull.bind(endpoint)
        self.notifier = LoopNotifier(self.ctx, endpoint)
        self.outbox = Outbox(self.router, config.max_queued_bytes_per_client,
                             config.client_mute_ms / 1000)
        self.dispatcher = Dispatcher(self, self.outbox, HANDLERS, self._before_answer)
        if self.security is not None:
            self.dispatcher.guard = self.security.guard
        self.zk = None
        self.metrics_server: Any = None     # prometheus_client's WSGI server
        self.controller: HaController | None = None
        self._stopping = False
        self._services: list[ServiceThread] = []
        self._next_schedule = 0.0
        self._next_tx_check = 0.0
        self._next_retention = 0.0
        self._next_scan = 0.0
        # queues written to whose entries are not all visible yet: (topic, queue) -> end
        self._pending_queues: dict[tuple[str, int], int] = {}

    # ------------------------------------------------------------ lifecycle
    def _socket(self, kind, rcvhwm: int = 100_000, sndhwm: int = 100_000,
                max_frame: int = -1) -> zmq.Socket:
        sock = self.ctx.socket(kind)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVHWM, rcvhwm)
        sock.setsockopt(zmq.SNDHWM, sndhwm)
        sock.setsockopt(zmq.MAXMSGSIZE, max_frame)
        return sock

    def _bind(self, sock, port: int, setting: str) -> int:
        host = self.config.listen_host
        try:
            if port == 0:
                return sock.bind_to_random_port(f"tcp://{host}")
            sock.bind(f"tcp://{host}:{port}")
        except zmq.ZMQError as exc:
            raise ConfigError(f"{setting} {port}: cannot listen on {host}: {exc}") from None
        return port

    def start(self) -> None:
        cfg = self.config
        t0 = time.monotonic()
        log.info("%s", self.store.start())
        self.metrics.recovery_seconds = time.monotonic() - t0
        self.offsets.load()
        self.state.flushed_offset = self.store.commitlog.mfq.flushed_offset()
        self.state.epoch = self.store.epoch_file.read()
        if self.security is not None:
            self.security.start_zap()
        port = self._bind(self.router, cfg.port, "port")
        ha_port = self._bind(self.ha_router, cfg.ha_port, "ha_port")
        if (port, ha_port) != (cfg.port, cfg.ha_port):
            self.config = cfg = cfg.replace(port=port, ha_port=ha_port)
        if cfg.metrics_port >= 0:        # scraped on prometheus_client's own thread
            self.metrics_server, metrics_port = serve(self, cfg.listen_host, cfg.metrics_port)
            if metrics_port != cfg.metrics_port:
                self.config = cfg = cfg.replace(metrics_port=metrics_port)
            log.info("metrics on http://%s:%d/metrics", cfg.listen_host, metrics_port)
        self.flush_service = make_flush_service(self.store, cfg, self.notifier.flushed,
                                                self.metrics.fsync.observe)
        self.zk = zkutil.connect(cfg.zookeeper, session_timeout_ms=cfg.zk_session_timeout_ms,
                                 access=self.security.zk_access if self.security else None,
                                 sasl=self.zk_sasl)
        if self.security is not None:
            self.security.start(self.zk)        # users known before the member node says "here"
        else:
            refuse_plaintext_in_secured_cluster(self.zk, cfg.cluster)
        self.registry = registry = BrokerRegistry(self.zk, cfg, self.member_info,
                                                  lambda: self.store.commitlog.max_offset)
        registry.register()
        self.group_topics = GroupTopics(self.zk, cfg.cluster, cfg.group)
        self._services = [self.flush_service, self.group_topics,
                          PeriodicService("checkpoint", cfg.checkpoint_interval_ms / 1000,
                                          lambda: self.store.checkpoint(thorough=False)),
                          PeriodicService("offset-persist", cfg.offset_persist_interval_ms / 1000,
                                          self.offsets.persist),
                          # offsets and lag in the member node, for status and elections
                          PeriodicService("member-info", MEMBER_INFO_INTERVAL_S,
                                          registry.update_info)]
        for s in self._services:
            s.start()
        self.controller = HaController(self.zk, cfg, registry,
                                       lambda: self.store.commitlog.max_offset,
                                       self.store.epoch_file.read, self.notifier.post)
        self.controller.start()
        self._update_visible()
        log.info("broker %s/%d serving at %s (%s, %s replication, pid %d, records checked by %s); "
                 "role from ZooKeeper", cfg.group, cfg.broker_id, cfg.address, cfg.flush.value,
                 cfg.replication.value, os.getpid(), native.describe())

    def stop(self) -> None:
        """Ask the loop to stop (any thread, or a signal handler)."""
        self._stopping = True

    def install_signal_handlers(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self.stop())

    def _shutdown(self) -> None:
        log.info("broker stopping")
        if self.metrics_server is not None:
            self.metrics_server.shutdown()       # no scrape reads the store past here
            self.metrics_server.server_close()
        if self.controller is not None:
            self.controller.stop()
        if self.registry is not None:
            self.registry.close(master=self.state.role == Role.MASTER)
        self._stop_following()
        for s in self._services:
            s.shutdown()
        self._drain_notifications()
        self._release_waiters()
        for w in self.ack_waiters.drain():
            self.dispatcher.reply(w.identity, w.request_id, w.type, pb.SERVICE_NOT_AVAILABLE,
                                  "broker shut down before the send was durable; it is stored",
                                  None)
        self.offsets.persist(force=True)
        self.store.close()
        zkutil.close(self.zk)
        self.notifier.close()
        for sock in (self.router, self.ha_router, self.notify_pull):
            sock.close(linger=0)
        if self.security is not None:
            self.security.stop()                 # the ZAP handler's sockets, before term
        self.ctx.term()
        log.info("broker stopped")

    # ------------------------------------------------------------ serving loop
    def serve_forever(self) -> None:
        poller = zmq.Poller()
        router, ha_router, notify = self.router, self.ha_router, self.notify_pull
        for sock in (router, ha_router, notify):
            poller.register(sock, zmq.POLLIN)
        st = self.state
        try:
            outbox = self.outbox
            while not self._stopping:
                events = dict(poller.poll(1 if outbox.waiting else int(HOUSEKEEPING_S * 1000)))
                if outbox.waiting:
                    outbox.flush()
                if notify in events:
                    self._drain_notifications()
                if ha_router in events:
                    self._drain_ha()
                if router in events:
                    if st.role == Role.SLAVE:
                        self._update_visible()   # replication moved it without waking us
                    self._drain_router()
                if st.appended:
                    st.appended = False
                    if self.sync_flush and self.flush_service is not None:
                        self.flush_service.wakeup()
                self._pump_schedule()
                self._update_visible()   # first: transfers carry the newest confirmed offset
                if self.ha is not None:
                    self.ha.pump(time.monotonic(), st.visible_offset,
                                 st.draining or (self.sync_replication and len(self.ack_waiters) > 0))
                self._housekeeping()
        finally:
            self._shutdown()

    def _pump_schedule(self) -> None:
        """Deliver delayed messages that came due (a master taking writes)."""
        now = time.monotonic()
        if self.schedule is None or now < self._next_schedule or not self.writable():
            return
        self._next_schedule = now + SCHEDULE_INTERVAL_S
        if self.schedule.pump(time.time_ns() // 1_000_000, self.state.visible_offset):
            self.state.appended = True
        if self.transactions is not None:
            self.transactions.catch_up()
            if now >= self._next_tx_check:
                self._next_tx_check = now + TX_CHECK_ROUND_S
                if self.transactions.check(time.time_ns() // 1_000_000, self.producers,
                                           lambda c, data: self.outbox.send(c, data, now),
                                           self.config):
                    self.state.appended = True
            self.transactions.commit_progress(self.state.visible_offset)

    def _drain_router(self) -> None:
        router, dispatch = self.router, self.dispatcher.dispatch
        if self.security is not None:
            for _ in range(MAX_DRAIN):
                try:
                    frames = router.recv_multipart(zmq.NOBLOCK, copy=False)
                except zmq.Again:
                    return
                # the User-Id ZAP gave the connection: checked on every request
                who = frames[-1].get("User-Id")
                dispatch([f.bytes for f in frames], who if isinstance(who, str) else None)
            return
        for _ in range(MAX_DRAIN):
            try:
                parts = router.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            dispatch(parts)

    def _before_answer(self, request: Request, answer) -> None:
        """A send acked at once (no flush or replication to wait for) is
        visible before its ack leaves: held pulls are answered first, so the
        consumer's answer goes out ahead of the producer's ack (on a busy
        host, waking the producer first delayed the consumer by about
        0.2 ms at the median)."""
        if request.type == pb.SEND and not (self.sync_flush or self.sync_replication):
            self._update_visible()

    def _drain_ha(self) -> None:
        now = time.monotonic()
        for _ in range(MAX_DRAIN):
            try:
                parts = self.ha_router.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            if len(parts) == 2 and self.ha is not None:
                self.ha.on_message(parts[0], parts[1], now)

    # ------------------------------------------------------------ news and role changes
    def _drain_notifications(self) -> None:
        st = self.state
        for kind, a, b in read_notes(self.notify_pull):
            if kind == b"f":
                st.flushed_offset = max(st.flushed_offset, a)
            elif kind == b"L":
                st.lease_until = a / 1e9
            elif kind == b"P":
                self._promote(a)
            elif kind == b"F":
                self._follow(a, b)
            elif kind == b"D":
                self._demote("ZooKeeper session lost or master node gone")
            elif kind == b"H":
                self._drain_for_handover()
            # b"w": only a wake-up; the loop re-reads what moved

    def _report(self) -> None:
        if self.controller is not None:
            self.controller.report(self.state.role, self.state.epoch)

    def _promote(self, epoch: int) -> None:
        """Become master at ``epoch`` (the controller holds the master node)."""
        self._stop_following()
        t = master_roles.take_over(self.store, self.config, epoch, self.offsets,
                                   self.delay_levels, self.ha_router, self.metrics)
        st = self.state
        st.flushed_offset = t.flushed_offset
        st.epoch, st.role, st.draining, st.stepping_down = epoch, Role.MASTER, False, False
        st.replicated_offset = -1
        self.metrics.promotions += 1
        self.queue_locks.clear()       # holders take their queues again on renewal
        self.schedule, self.transactions, self.ha = t.schedule, t.transactions, t.ha
        if self.controller is not None:     # the ISR as published, read where it is kept
            controller = self.controller
            t.ha.isr_source = lambda: controller.isr_published
        self._report()
        log.info("serving as Role.MASTER of %s at epoch %d from offset %d", self.config.group, epoch,
                 self.store.commitlog.max_offset)

    def _demote(self, why: str) -> None:
        """Stop acking writes now; follow whoever is master next (an ``F`` order)."""
        st = self.state
        if st.role != Role.MASTER:
            return
        st.role, st.draining = Role.SLAVE, False
        self.ha = None
        self.schedule = None
        self.transactions = None
        for w, status, error in master_roles.unconfirmed(self.ack_waiters, why):
            self.dispatcher.reply(w.identity, w.request_id, w.type, status, error, w.response)
        self._report()
        log.warning("serving as Role.SLAVE: %s", why)

    def _follow(self, epoch: int, cut: int) -> None:
        """Follow the master of ``epoch``: truncate what the group does not share, then replicate."""
        st = self.state
        if st.role == Role.MASTER:
            self._demote(f"broker of epoch {epoch} is master")
        self._stop_following()
        if slave_roles.truncate(self.store, epoch, cut):
            self.metrics.truncations += 1
            st.visible_offset = min(st.visible_offset, cut)
            st.flushed_offset = min(st.flushed_offset, cut)
        assert self.registry is not None
        curve = None if self.security is None else LinkCurve(
            self.security.keys, self.security.trusted, self.registry.master_public_key)
        self.ha_client = slave_roles.follow(self.store, self.config, epoch,
                                            self.registry.master_ha_address,
                                            self._slave_progress, self.offsets, curve)
        st.epoch, st.stepping_down = epoch, False
        self._report()

    def _slave_progress(self, confirmed: int) -> None:
        """The replication thread's news after each transfer. The serving thread
        reads the offsets on every loop, so it is woken only when a pull waits
        on them: a wake-up per transfer cost the slave a thread switch per
        send. (That thread sets the offset, then looks for held pulls; this
        thread holds a pull, then reads the offset: one of the two always sees
        the other.)"""
        if self.pull_hold.held:
            self.notifier.wake()

    def _stop_following(self) -> None:
        slave_roles.stop_following(self.ha_client)
        self.ha_client = None

    def _drain_for_handover(self) -> None:
        """Planned switchover: refuse new writes; hand over once a slave holds all."""
        st = self.state
        if st.role != Role.MASTER or self.ha is None:
            return
        if not st.draining:
            log.info("switchover requested: draining writes")
            st.draining = True
        if master_roles.ready_to_hand_over(self.ha.status(), self.store.commitlog.max_offset,
                                           len(self.ack_waiters)):
            self._demote("handed over by a planned switchover")
            st.stepping_down = True
            if self.controller is not None:
                self.controller.drained()

    # ------------------------------------------------------------ what consumers see
    def _update_visible(self) -> None:
        """Recompute the replicated and visible offsets; answer what they allow."""
        st = self.state
        end = self.store.dispatched_offset
        if st.role == Role.MASTER:
            if self.ha is not None:
                replicated, st.in_sync_replicas = self.ha.ack_state()
                st.replicated_offset = replicated if replicated is not None else -1
            visible = end
            if self.sync_flush:
                visible = min(visible, st.flushed_offset)
            if self.sync_replication:
                visible = min(visible, max(0, st.replicated_offset))
            self._release_waiters()
        else:
            confirmed = self.ha_client.master_confirmed if self.ha_client is not None else 0
            visible = min(end, confirmed)
        appended, pending = self.store.appended, self._pending_queues
        while appended:                  # the queues written to (bounded: one key per queue)
            topic, qid, upto = appended.popleft()
            key = (topic, qid)
            if pending.get(key, -1) < upto:
                pending[key] = upto
        if visible > st.visible_offset:
            st.visible_offset = visible
            self._answer_ready_pulls(visible)

    def _answer_ready_pulls(self, visible: int) -> None:
        """Answer the held pulls of the queues written to whose entries became
        visible: only those queues are looked at, so a send costs the same
        with 10 held pulls or 10,000. A queue stays pending until all it was
        written is visible (a pull held meanwhile is answered then)."""
        pending = self._pending_queues
        keys = list(pending)
        for key in keys:
            if pending[key] <= visible:
                del pending[key]
        if self.pull_hold.held and keys:
            self._answer_pulls(self.pull_hold.take_ready(self._visible_max, keys))

    def _conditions(self) -> tuple[float, float]:
        st = self.state
        return (st.flushed_offset if self.sync_flush else NEVER,
                st.replicated_offset if self.sync_replication else NEVER)

    def _release_waiters(self) -> None:
        if not self.state.lease_valid(time.monotonic()):
            return   # a successor may exist: ack nothing until the lease is back
        now = time.monotonic()
        for w in self.ack_waiters.release(*self._conditions()):
            self.metrics.ack_wait.observe(now - w.since)
            if w.type == pb.SEND:
                self.mark_replicas(w.response)
            self.dispatcher.reply(w.identity, w.request_id, w.type, pb.OK, "", w.response)

    def _visible_max(self, topic: str, queue_id: int) -> int:
        cq = self.store.find_queue(topic, queue_id)
        return self.store.visible_max_offset(cq, self.state.visible_offset) if cq else 0

    def _answer_pulls(self, pulls) -> None:
        now = time.monotonic()
        for p in pulls:
            self.metrics.pull_hold.observe(now - p.since)
            request = Request(p.identity, p.request_id, p.type, p.request)
            answer = self.dispatcher.call(pull_held if p.type == pb.PULL else pull_many_held,
                                          request)
            if answer is not None:
                self.dispatcher.answer(request, answer)

    # ------------------------------------------------------------ timers
    def _housekeeping(self) -> None:
        """Deadlines every iteration (a front check); scans of held pulls and
        replication links every HOUSEKEEPING_S, not once per drained batch."""
        now = time.monotonic()
        cfg = self.config
        for w, status in self.ack_waiters.expire(now, *self._conditions()):
            what = ("not flushed within sync_flush_timeout_ms "
                    f"({cfg.sync_flush_timeout_ms} ms)") if status == pb.FLUSH_DISK_TIMEOUT \
                else (f"not held by the slaves in sync (sync_replicas {cfg.sync_replicas}, "
                      f"min_sync_replicas {cfg.min_sync_replicas}) within slave_timeout_ms "
                      f"({cfg.slave_timeout_ms} ms)")
            self.dispatcher.reply(w.identity, w.request_id, w.type, status,
                                  what + "; the message is stored", w.response)
        if now < self._next_scan:
            return
        self._next_scan = now + HOUSEKEEPING_S
        if self.pull_hold.held:
            self._answer_pulls(self.pull_hold.take_expired(now))
        for identity in self.outbox.expire(now):
            n = self.pull_hold.forget(identity)
            log.info("forgot muted client %s (%d held pulls dropped)", identity.hex(), n)
        if self.ha is not None:
            self.ha.housekeeping(now)
            if self.controller is not None:
                self.controller.request_isr(set(self.ha.in_sync_ids()))
                self.controller.request_acks(not self.sync_replication
                                             or self.ha.slaves_available())
            if self.state.draining:
                self._drain_for_handover()
        if now >= self._next_retention:
            self._next_retention = now + cfg.retention_check_interval_ms / 1000
            self._retention()
            stale = [cid for cid, (seen, *_) in self.clients.items() if now - seen > CLIENT_EXPIRY_S]
            for cid in stale:
                del self.clients[cid]

    def _retention(self) -> None:
        cfg = self.config
        floor = self.min_consumed_physical() if cfg.retention_wait_for_consumers else None
        try:
            self.metrics.retention_deleted += self.store.delete_expired(cfg.file_reserved_hours,
                                                                        floor)
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
