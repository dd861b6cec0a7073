"""The slave side of replication: a thread with its own DEALER socket to the
master's HA port, and while it runs the store's one writer (``store/one_writer``:
the serving thread hands it the store when it starts it and takes it back
when it has stopped; every other write of a slave's store, retention's, is
posted to it, ``post``) (without auth its own ZMTP socket, ``transport.dealer``,
read and written by this thread: no ZeroMQ I/O thread between a transfer
and its ack; with auth libzmq's, for CURVE). It reports its max offset, applies each chunk at its log's
end (byte-identical), checks its records, fsyncs under SYNC_FLUSH, and
reports again: at once when the master waits on the report (``ack_now``),
else within ``REPORT_DELAY_S``; then it writes the chunk's consume-queue
entries and takes the consumer-offset changes the master sent along (the
ack waits on neither: ``_finish``). A silent link (``ha_housekeeping_ms``) is dropped and
re-dialled with backoff; so is a master that changes address. A chunk that
cannot be applied (a damaged record, or one naming a queue the store refuses)
is cut from the log and the link stops for good (``halted`` says why, in the
member node): fetching it again would only bring the same bytes.

A native link watches itself as libzmq's heartbeats do (``Dealer.keep_alive``; ``_redial``
reports again once it closed).

The thread has a ZeroMQ context of its own, whose I/O thread a libzmq link
starts. Under ASYNC replication it first lowers its own priority, which
that I/O thread inherits: Linux's SCHED_IDLE policy (``ha_apply_idle``), under which
any other thread that wakes on its CPU takes it at once, or else
``ha_apply_nice`` steps of niceness. Where a slave shares a host with a
master (crossed pairs, or one test machine), applying the log then yields the
CPU to the master's writers and to readers instead of taking it in the middle
of their round trips. A nicer thread is not enough for that: the scheduler
lets the running thread finish its slice first, a few hundred microseconds
added to one round trip in eight. Under SYNC replication every ack waits on
this thread, so it keeps the broker's priority."""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import zmq

from duomq.common.config import FlushDiskType, ReplicationMode
from duomq.common.curve import KeyPair
from duomq.common.service import ServiceThread
from duomq.format.record import RecordError
from duomq.proto import codec, pb
from duomq.replication.priority import lift_idle_threads, lower_priority
from duomq.transport.dealer import ZmtpDealer
from duomq.transport.links import Dealer, LibzmqDealer
from duomq.transport.zsend import readable

log = logging.getLogger(__name__)
MAX_BACKOFF_S = 5.0
# A transfer nothing waits on (ASYNC replication) is reported this late, so
# that one report covers the chunks of many sends
REPORT_DELAY_S = 0.005
HEARD_GRACE_S = 0.5     # a heartbeat this late still counts as on time (lag_ms)
RECONNECT_S = 0.1       # a native link dials again at most this often (libzmq's RECONNECT_IVL)
STARVED_S = 1.0         # a link under SCHED_IDLE this long without a turn is starved


class ReplicationHalted(Exception):
    """The master sent bytes this slave will not keep."""


class OtherEpoch(Exception):
    """The peer at the address is the master of another epoch than the one
    this link follows: nothing it sends is applied."""


def libzmq_link_options(heartbeat_ms: int) -> dict[int, int]:
    """A libzmq link's DEALER options.

    ZMTP heartbeats: a connection that stops carrying anything (a cut link,
    not a reset) is closed and dialled again by ZeroMQ within two heartbeat
    periods, instead of waiting out TCP's retransmission backoff (after a 5 s
    cut, the stream came back 1.2-2.8 s after the heal); a connect whose SYN
    is lost is retried every half beat.

    No receive high-water mark (0). With one and heartbeats together, libzmq
    4.3 aborts the whole broker (``Assertion failed: _input_stopped
    (src/stream_engine_base.cpp:396)``, libzmq#3937 and #4767, open): the
    pipe to this thread fills, the engine stops reading, a heartbeat times
    out, and the stale wake-up of the pipe restarts the reconnected engine's
    input. A slave restarted on a loaded secured pair died so. What is in
    flight is bounded by the master instead: at most ``ha_window_bytes`` of
    log unacknowledged, and a link silent for ``ha_housekeeping_ms`` dropped
    at both ends."""
    return {zmq.LINGER: 0, zmq.RCVHWM: 0,
            zmq.HEARTBEAT_IVL: max(1, heartbeat_ms // 2),
            zmq.HEARTBEAT_TIMEOUT: 2 * heartbeat_ms,
            zmq.CONNECT_TIMEOUT: max(1, heartbeat_ms // 2)}


@dataclass(frozen=True)
class LinkCurve:
    """CURVE on the replication link (auth = true): this broker's keypair
    (the master admits only broker keys), the broker keys it trusts (its
    own, and a rotation's next or previous one), and the key the master
    serves with as its member node says (b"": not known)."""
    keys: KeyPair
    trusted: tuple[bytes, ...]
    master_key: Callable[[], bytes]

    def server_key(self) -> bytes:
        """The key to expect of the master; a key this broker does not
        trust is refused (the link is re-dialled later)."""
        served = self.master_key()
        if served and served not in self.trusted:
            raise ConnectionRefusedError(
                f"the master serves the broker key {served.decode()}, which this broker's "
                f"auth_dir does not hold (a broker key rotation: restart this broker once "
                f"auth_dir has broker-next.key)")
        return served or self.keys.public


class HAClient(ServiceThread):
    name = "ha-client"

    def __init__(self, store, config, master_ha_address: Callable[[], str | None],
                 on_progress: Callable[[int], None], offsets=None,
                 curve: LinkCurve | None = None, epoch: int = 0,
                 on_lost: Callable[[], None] = lambda: None):
        super().__init__()
        self.on_lost = on_lost      # a connection that carried the link was lost (metrics)
        self.curve = curve          # None: plaintext (auth = false)
        self.offsets = offsets      # ConsumerOffsetManager: takes the master's changes
        self.store = store
        self.config = config
        self.master_ha_address = master_ha_address   # from ZooKeeper; None while unknown
        self.on_progress = on_progress   # (master confirmed), after the store's dispatched offset
        self.ctx: zmq.Context | None = None   # the link's own, made by the thread
        self.sync_flush = config.slave_flush is FlushDiskType.SYNC_FLUSH
        self.master_confirmed = 0
        self.master_max = 0
        # the epoch this link follows, after the log was cut for it: reports
        # name it (the master ignores another epoch's) and a transfer of
        # another epoch is never applied
        self.epoch = epoch
        self.halted = ""              # why replication stopped for good ("" while it runs)
        self.last_heard = 0.0         # the link's silence clock (starts when it is dialled)
        self.last_received = 0.0      # when the master's last transfer arrived; 0: never
        self.caught_up = False        # the last transfer left us holding all the master had
        self.caught_up_at = 0.0       # when one last did (monotonic); 0: not since the start
        self._told_opens = 0          # a native link's losses are logged once per connection
        # the last transfer applied and acked, its rest not done yet (``_finish``)
        self._checked = None          # its records, checked: their entries to write
        self._told = None             # its message: offsets, the confirmed offset
        # the store's writer before and after this thread (who starts it)
        self._handback = threading.get_ident()
        self._jobs: collections.deque[Callable[[], None]] = collections.deque()
        self._posting = threading.Lock()     # a post against the thread's end
        self.ended = False            # the thread has stopped and handed the store back
        self.idle = False             # under SCHED_IDLE (ASYNC, ha_apply_idle) until starved
        self.turn_at = 0.0            # when the thread last had a turn (0: not started)

    def lift_if_starved(self, now: float) -> bool:
        """The serving thread's check (it keeps the broker's priority): a
        thread under SCHED_IDLE gets no CPU at all while the host's cores are
        busy, so a link that has had no turn for ``STARVED_S`` stops falling
        behind without end: it runs ``ha_apply_nice`` nicer from now on, with
        the ZeroMQ threads it started (one went 35 s without a turn on a
        loaded machine, missing a hand-over it was asked to report for).
        True when it lifted the link now."""
        if not self.idle or self.turn_at == 0.0 or now - self.turn_at < STARVED_S:
            return False
        self.idle = False
        lifted = lift_idle_threads(self.config.ha_apply_nice)
        log.warning("the replication thread had no turn for %.1f s under SCHED_IDLE (the "
                    "host's CPUs are busy): %d thread(s) now run %d nicer than the broker "
                    "instead", now - self.turn_at, lifted, self.config.ha_apply_nice)
        return True

    def lag_ms(self, now: float | None = None) -> int:
        """How far this slave is behind its master, in ms: 0 while the last
        transfer (data or heartbeat, every ``ha_heartbeat_ms`` when idle) left
        it holding everything the master had written and arrived on time;
        otherwise the time since one last did, which bounds the age of the
        oldest record it lacks (to within the link's one-way delay). -1 when
        it has not caught up since it started. Measured on this broker's own
        monotonic clock: no clock is compared across hosts."""
        at = self.caught_up_at
        if at == 0.0:
            return -1
        now = time.monotonic() if now is None else now
        if self.caught_up and \
                now - self.last_received <= self.config.ha_heartbeat_ms / 1000 + HEARD_GRACE_S:
            return 0
        return int((now - at) * 1000)

    def acked_offset(self) -> int:
        if self.sync_flush:
            return self.store.commitlog.mfq.flushed_offset()
        return self.store.commitlog.max_offset

    # ------------------------------------------------------------ the store's writer
    def post(self, job: Callable[[], None]) -> bool:
        """Have this thread, the store's writer while it runs, do ``job``
        (a write of the store another thread wants: retention's), between
        two transfers or within 100 ms when idle. False once the thread has
        ended: it handed the store back, and the caller does ``job`` itself
        (a job posted while it ends is done before it hands the store back)."""
        with self._posting:
            if self.ended:
                return False
            self._jobs.append(job)
        self.wakeup()
        return True

    def _run_jobs(self) -> None:
        while self._jobs:
            job = self._jobs.popleft()
            try:
                job()
            except Exception:
                log.exception("a write posted to the replication thread failed")

    # ------------------------------------------------------------ loop
    def run(self) -> None:
        self.store.adopt()            # the store's one writer until this thread ends
        try:
            if self.config.replication is ReplicationMode.ASYNC:   # under SYNC, acks wait on us
                self.idle = lower_priority(self.config.ha_apply_idle, self.config.ha_apply_nice)
            self.ctx = zmq.Context(1)     # after that: its I/O thread inherits the priority
            try:
                self._run()
            finally:
                self.ctx.term()
        finally:
            with self._posting:       # what was posted until now is done by this thread
                try:
                    self._run_jobs()
                finally:
                    self.store.hand_over(self._handback)    # back to who started us
                    self.ended = True

    def _run(self) -> None:
        backoff = 0.1
        while not self.stopped:
            self.turn_at = time.monotonic()
            self._run_jobs()
            address = self.master_ha_address()
            if not address:
                self.wait_for_running(0.2)
                continue
            try:
                self._follow(address)
                backoff = 0.1
            except ReplicationHalted as exc:
                self.halted = str(exc)
                log.error("%s", exc)
                return
            except ConnectionRefusedError as exc:      # a master key not trusted
                log.warning("not following %s: %s", address, exc)
            except OtherEpoch as exc:
                log.warning("left %s: %s", address, exc)
            except Exception:
                log.exception("replication from %s failed", address)
            if not self.stopped:
                self.turn_at = time.monotonic() + backoff    # asleep until then, not starved
                self.wait_for_running(backoff)
                backoff = min(MAX_BACKOFF_S, backoff * 2)

    def _dial(self, address: str) -> Dealer:
        """The link's socket: its own ZMTP (``ha_transport``, no auth), or
        libzmq's DEALER."""
        if self.curve is None and self.config.native_ha_port:
            return ZmtpDealer(address, whole=True)
        cfg = self.config
        assert self.ctx is not None        # made by run()
        sock = self.ctx.socket(zmq.DEALER)
        for option, value in libzmq_link_options(cfg.ha_heartbeat_ms).items():
            sock.setsockopt(option, value)
        if self.curve is not None:
            # broker keys both ways: the master admits only them, and we
            # follow only a master that holds the secret half of one
            sock.curve_secretkey = self.curve.keys.secret
            sock.curve_publickey = self.curve.keys.public
            try:
                sock.curve_serverkey = self.curve.server_key()
            except ConnectionRefusedError:
                sock.close(linger=0)
                raise
        sock.connect(address)
        return LibzmqDealer(sock, address)

    def _follow(self, address: str) -> None:
        cfg = self.config
        sock = self._dial(address)
        beat = cfg.ha_heartbeat_ms / 1000
        self._told_opens = 0
        log.info("replicating from %s (local end %d)", address, self.store.commitlog.max_offset)
        try:
            self._report(sock, resync=True)
            last_report = time.monotonic()
            self.last_heard = time.monotonic()
            report_at = None   # a delayed report is due then (chunks nothing waits on)
            poller = zmq.Poller()          # one for the link (Socket.poll makes one per call)
            poller.register(sock.poll_key(), zmq.POLLIN)
            while not self.stopped:
                if self._jobs:
                    self._run_jobs()
                if self.master_ha_address() != address:
                    log.info("master moved: leaving %s", address)
                    return
                timeout_ms = 100 if report_at is None else \
                    max(0, min(100, int((report_at - time.monotonic()) * 1000) + 1))
                # (a native socket's poll may be a connect finishing or a PING:
                # readable() reads what came and says whether a message did)
                if poller.poll(timeout_ms) and readable(sock):
                    # apply every chunk already here, then report once: under load
                    # reports coalesce; one the master waits on goes at once
                    urgent = resync = False
                    while not resync:
                        self.turn_at = time.monotonic()
                        resync, wanted = self._apply(sock.recv_multipart(copy=False))
                        urgent = urgent or wanted
                        if not readable(sock):
                            break
                    self.last_heard = self.last_received = time.monotonic()
                    if urgent or resync:
                        self._report(sock, resync=resync)
                        last_report, report_at = time.monotonic(), None
                    elif report_at is None:
                        report_at = self.last_heard + REPORT_DELAY_S
                    self._finish()         # after the report: the ack waits on none of it
                now = self.turn_at = time.monotonic()
                if now - self.last_heard > cfg.ha_housekeeping_ms / 1000:
                    log.warning("replication link to %s silent for %.1f s: re-dialling", address,
                                now - self.last_heard)
                    self.on_lost()
                    return
                if sock.keep_alive(now, beat) and self._redial(sock, now):
                    last_report, report_at = now, None
                elif (report_at is not None and now >= report_at) or \
                        now - last_report >= cfg.ha_heartbeat_ms / 1000:
                    self._report(sock)
                    last_report, report_at = now, None
        finally:
            try:      # what was acked gets its entries (a cut waits for this thread to end)
                self._finish()
            finally:
                sock.close(linger=0)

    def _redial(self, sock: Dealer, now: float) -> bool:
        """A link its own liveness closed (``Dealer.keep_alive``, this
        broker's ``ha_heartbeat_ms`` whatever the master's, as libzmq's
        heartbeats and connect timeout do for its DEALER): dialled again with
        a report, at most every RECONNECT_S once one failed. True when it dialled."""
        if sock.take_lost():              # said once per connection that opened, not per dial
            level = logging.INFO if sock.opens != self._told_opens else logging.DEBUG
            if sock.opens != self._told_opens:
                self.on_lost()
            self._told_opens = sock.opens
            log.log(level, "replication link to %s: %s; dialling again", sock.address, sock.why)
        if now - sock.dialled_at < RECONNECT_S:
            return False
        self._report(sock)                 # dials: the master takes it as a new link
        return True

    def _apply(self, frames) -> tuple[bool, bool]:
        """Apply one transfer (a header frame, then the log bytes: libzmq's
        Frames, or bytes from a native link). Returns (resync: it did not
        start at our end, the master wants a report now)."""
        self._finish()      # the last chunk's entries first: each check covers its own chunk
        header = frames[0] if isinstance(frames[0], bytes) else frames[0].bytes
        msg = codec.decode_request(codec.decode_frame(header))
        data = b""
        if len(frames) > 1:
            data = frames[1] if isinstance(frames[1], bytes) else frames[1].buffer
        if msg.epoch != self.epoch:
            raise OtherEpoch(f"it sends as the master of epoch {msg.epoch}; this link follows "
                             f"epoch {self.epoch}")
        self.master_max = msg.master_max_offset
        end = self.store.commitlog.max_offset
        if len(data) and self.stopped:
            return False, False          # the link is being replaced: its cut comes first
        if len(data):
            if msg.offset != end:
                return True, True
            safe = self.store.dispatched_offset       # a record boundary
            self.store.append_raw(msg.offset, data)
            try:
                checked = self.store.check_dispatch()
            except RecordError as exc:
                cut, _records = self.store.truncate_to(safe)
                raise ReplicationHalted(
                    f"replication from {self.master_ha_address()} stopped: {exc}. The "
                    f"{cut} bytes from offset {safe} were cut, not kept; restart this "
                    f"broker once the master's log is examined") from None
            if self.sync_flush:
                self.store.commitlog.flush()
            self._checked = checked
        self._told = msg
        self.caught_up = self.store.commitlog.max_offset >= msg.master_max_offset
        if self.caught_up:
            self.caught_up_at = self.last_received = time.monotonic()
        return False, msg.ack_now

    def _finish(self) -> None:
        """What the last transfer asked that its ack need not wait for:
        its records' consume-queue entries (checked before the ack), the
        consumer offsets and the confirmed offset it carried, and the news to
        the serving thread."""
        checked, msg = self._checked, self._told
        self._checked = self._told = None
        if checked is not None:
            self.store.write_dispatch(checked)
        if msg is None:
            return
        if self.offsets is not None:
            for o in msg.offsets:
                self.offsets.commit(o.consumer_group, o.topic, o.queue_id, o.offset)
        self.master_confirmed = msg.confirmed_offset
        self.on_progress(self.master_confirmed)

    def _report(self, sock, resync: bool = False) -> None:
        report = pb.HaReport(broker_id=self.config.broker_id,
                             max_offset=self.store.commitlog.max_offset,
                             acked_offset=self.acked_offset(), epoch=self.epoch,
                             address=self.config.address, resync=resync)
        sock.send(codec.encode_request(0, pb.HA_REPORT, report))

