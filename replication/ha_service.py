"""The master side of replication. The broker's serving thread owns the HA
ROUTER socket and calls ``on_message``, ``pump`` and ``housekeeping``; no
other thread touches this state.

A transfer nothing waits on (no SYNC ack, hand-off or lease renewal) lingers
``ha_linger_ms`` after the first byte it would carry was written, unless it
holds ``LINGER_BYTES`` already: under ASYNC replication one transfer, and one
wake-up of the slave, then carries the sends of that millisecond instead of
one each (issue 41: on a two-core host the slave's wake-ups took CPU from
the master's round trips; a one-outstanding producer to an ASYNC pair went
from 4,150-4,390 to 4,890-4,930 sends a second). ``linger_due`` tells the serving loop
when to come back for it."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import zmq

from duomq.proto import codec, pb
from duomq.replication.protocol import HaState, ack_point, in_sync, next_state, required_acks
from duomq.transport.zsend import Sent, send_now

log = logging.getLogger(__name__)
MAX_LINKS = 8             # replication links one master keeps (a group has a few slaves)
LINGER_BYTES = 64 * 1024  # a lingering transfer leaves at once when it holds this much


@dataclass(frozen=True)
class LinkStatus:
    """A replication link as status answers and metrics show it."""
    broker_id: int
    address: str
    state: str                   # HaState's value
    max_offset: int
    acked_offset: int
    lag_bytes: int               # the master's end minus what the slave acked


@dataclass
class HAConnection:
    identity: bytes
    broker_id: int = -1
    address: str = ""
    state: HaState = HaState.READY
    max_offset: int = 0          # slave's log end, as last reported
    acked_offset: int = 0        # held durably by the slave (its flush mode)
    sent_offset: int = 0         # next byte to send
    last_heard: float = 0.0
    last_sent: float = 0.0
    offsets_version: int = 0    # consumer-offset changes this slave has been sent
    confirmed_sent: int = -1     # the confirmed offset this slave was last told
    linger_from: float | None = None   # unsent bytes lingering since (monotonic s)


class HAService:
    """The links of a master of ``epoch`` to its slaves."""

    def __init__(self, store, config, socket: Sent, epoch: int, offsets):
        self.store = store
        self.offsets = offsets              # ConsumerOffsetManager: changes go to slaves
        self.config = config
        self.socket = socket
        self.epoch = epoch
        self.links: dict[bytes, HAConnection] = {}
        # the in-sync set as ZooKeeper lists it (the HA controller publishes
        # it and orders it set here); None: none published, every link in sync counts
        self.isr: frozenset[int] | None = None
        # sets the controller is writing and has not confirmed: ZooKeeper may
        # list their members already (a write whose answer was lost)
        self.isr_writing: frozenset[int] = frozenset()
        self.last_acked: dict[int, int] = {}   # broker id -> what it last said it holds
        self.linger_s = config.ha_linger_ms / 1000
        self.linger_due: float | None = None   # a lingering transfer leaves then (monotonic s)
        self._refused: set[tuple[bytes, int]] = set()   # (link, epoch) reports logged as ignored
        self._last_round: float | None = None   # the last housekeeping (monotonic s)
        # fault injection for tests (``DUOMQ_FAULT_HOLD_CONFIRMED``, a file's
        # path): while that file exists, slaves are told the confirmed offset
        # as it was when it appeared: a master that dies then leaves a slave
        # holding records acked past what it was told consumers may read
        self._hold_path = os.environ.get("DUOMQ_FAULT_HOLD_CONFIRMED") or None
        self._held_confirmed: int | None = None

    # ------------------------------------------------------------ inbound
    def on_message(self, identity: bytes, data: bytes, now: float) -> bool:
        """Handle a slave's report; True if an acknowledged offset moved."""
        try:
            frame = codec.decode_frame(data)
            if frame.type != pb.HA_REPORT:
                raise codec.FrameError(pb.BAD_REQUEST, f"unexpected type {frame.type} on HA socket")
            report = codec.decode_request(frame)
        except codec.FrameError as exc:
            log.warning("bad replication frame from %s: %s", identity.hex(), exc)
            return False
        link = self.links.get(identity)
        if report.epoch != self.epoch:
            # a link of another epoch: an older one's slave has not cut its log
            # for this epoch, so what it claims to hold is not known to be ours
            if link is not None:
                del self.links[identity]
            if (identity, report.epoch) not in self._refused:
                if len(self._refused) > 1024:
                    self._refused.clear()
                self._refused.add((identity, report.epoch))
                if report.epoch == 0:        # epochs start at 1: the field was not sent
                    log.error("replication report of broker %d names no epoch: a slave of an "
                              "older release, which this master does not replicate to "
                              "(upgrade slaves before masters)", report.broker_id)
                else:
                    log.warning("replication report of broker %d for epoch %d ignored: this "
                                "master leads epoch %d", report.broker_id, report.epoch,
                                self.epoch)
            return False
        if link is None:
            if len(self.links) >= MAX_LINKS:
                log.warning("replication report from %s refused: %d links already", identity.hex(),
                            len(self.links))
                return False
            link = self.links[identity] = HAConnection(identity)
            for other, old in list(self.links.items()):
                if other != identity and old.broker_id == report.broker_id:
                    # the slave dialled again (its connection was cut): the
                    # new link replaces the old, which would hold stale
                    # offsets until housekeeping dropped it
                    log.info("replication link of slave %d replaced by a new connection",
                             report.broker_id)
                    del self.links[other]
                    if old.state is HaState.TRANSFER:
                        # a slave that was streaming dialled again (a cut, a
                        # master that stopped past its watch): the new link
                        # streams from what this report says it holds, and
                        # counts as in sync at once (a handshake state here
                        # answered the sends in between SLAVE_NOT_AVAILABLE)
                        link.state = HaState.TRANSFER
        before = link.acked_offset
        link.broker_id, link.address = report.broker_id, report.address
        link.last_heard = now
        end = self.store.commitlog.max_offset
        if report.max_offset > end:
            # the slave holds more than we do: it must truncate before it follows
            # (an old master rejoining); nothing is sent until it does
            log.warning("slave %d reports %d past our end %d", report.broker_id,
                        report.max_offset, end)
        reported = max(0, min(report.max_offset, end))
        if link.state in (HaState.READY, HaState.SUSPEND) or report.resync:
            link.sent_offset = reported                # (re)start where the slave is
            link.offsets_version = 0                   # and send every consumer offset again
        link.sent_offset = max(link.sent_offset, reported)
        link.max_offset = report.max_offset
        # a slave holds at most what it was sent: a claim past that (a bug, or
        # a peer that is no slave) neither confirms writes nor opens the window
        link.acked_offset = max(0, min(report.acked_offset, link.sent_offset))
        self.last_acked[link.broker_id] = link.acked_offset
        link.state = next_state(link.state, "report")
        return link.acked_offset != before

    def heard_holding(self, end: int, since: float) -> bool:
        """Whether a streaming slave of the published in-sync set holds
        ``end``, by a report it sent at or after ``since`` (monotonic s):
        alive now, not only when it last spoke. One outside the set would
        hold everything and still not be elected: the group left without
        a master (a slave restarted just before a switchover was so)."""
        return any(link.state is HaState.TRANSFER and link.acked_offset >= end
                   and link.last_heard >= since
                   and (self.isr is None or link.broker_id in self.isr)
                   for link in self.links.values())

    # ------------------------------------------------------------ outbound
    def ask_reports(self, now: float, confirmed: int) -> None:
        """An empty transfer to every streaming slave, asking for a report at
        once (``ack_now``)."""
        end = self.store.commitlog.max_offset
        for link in self.links.values():
            if link.state is HaState.TRANSFER:
                self._send(link, b"", end, now, confirmed, True)

    def pump(self, now: float, confirmed: int, waiting: bool) -> None:
        """Send what each slave lacks, up to the window. ``confirmed``: what
        consumers may see (slaves cap their readers there); ``waiting``: the
        master waits on slave reports right now (a SYNC ack, a handover)."""
        if self._hold_path is not None:
            confirmed = self._fault_confirmed(confirmed)
        cfg = self.config
        end = self.store.commitlog.max_offset
        self.linger_due = None
        for link in self.links.values():
            if link.state not in (HaState.HANDSHAKE, HaState.TRANSFER):
                continue
            if self._lingers(link, now, end, waiting):
                continue
            while link.sent_offset < end and \
                    link.sent_offset - link.acked_offset < cfg.ha_window_bytes:
                data = self.store.read_raw(link.sent_offset, cfg.ha_transfer_batch_bytes)
                if not data or not self._send(link, data, end, now, confirmed, waiting):
                    break
                link.sent_offset += len(data)
                link.state = next_state(link.state, "sent")
            if self.offsets is not None and self.offsets.version > link.offsets_version:
                version, changes = self.offsets.changes_since(link.offsets_version)
                if self._send(link, b"", end, now, confirmed, waiting, changes):
                    link.offsets_version = version
            # the slave caps its readers at the confirmed offset: tell it as soon
            # as it moves (a SYNC ack), not at the next heartbeat
            if confirmed > link.confirmed_sent or \
                    now - link.last_sent >= cfg.ha_heartbeat_ms / 1000:
                self._send(link, b"", end, now, confirmed, waiting)

    def _fault_confirmed(self, confirmed: int) -> int:
        assert self._hold_path is not None
        if not os.path.exists(self._hold_path):
            self._held_confirmed = None
            return confirmed
        if self._held_confirmed is None:
            log.warning("fault injection: slaves are told confirmed offset %d while %s exists",
                        confirmed, self._hold_path)
            self._held_confirmed = confirmed
        return self._held_confirmed

    def _lingers(self, link: HAConnection, now: float, end: int, waiting: bool) -> bool:
        """Whether the link's transfer waits for more (and what it would
        carry with it: offsets, the confirmed offset, a heartbeat); sets
        ``linger_due``."""
        unsent = end - link.sent_offset
        if waiting or not self.linger_s or link.state is not HaState.TRANSFER or \
                not 0 < unsent < LINGER_BYTES:
            link.linger_from = None
            return False
        if link.linger_from is None:
            link.linger_from = now
        due = link.linger_from + self.linger_s
        if now >= due:
            link.linger_from = None
            return False
        self.linger_due = due if self.linger_due is None else min(self.linger_due, due)
        return True

    def _send(self, link: HAConnection, data: bytes, end: int, now: float, confirmed: int,
              waiting: bool, offsets=()) -> bool:
        # the log bytes travel as a second ZeroMQ frame, sent without a copy:
        # nesting a 1 MiB chunk in two protobuf messages cost four copies
        # a report at once only when something waits on it: under ASYNC
        # replication the slave reports on its timer (one report per many chunks)
        ack_now = waiting or \
            link.sent_offset + len(data) - link.acked_offset > self.config.ha_window_bytes // 2
        msg = pb.HaTransfer(epoch=self.epoch, offset=link.sent_offset,
                            master_max_offset=end, confirmed_offset=confirmed, ack_now=ack_now)
        for (group, topic, qid), off in offsets:
            msg.offsets.add(consumer_group=group, topic=topic, queue_id=qid, offset=off)
        frame = codec.encode_request(0, pb.HA_TRANSFER, msg)
        try:   # the socket is ROUTER_MANDATORY: a full or gone peer raises, never drops
            send_now(self.socket, [link.identity, frame, data], copy=len(data) < 65536)
        except zmq.ZMQError:
            return False   # resumed on the slave's next report
        link.last_sent = now
        link.confirmed_sent = confirmed
        return True

    def housekeeping(self, now: float) -> None:
        """Drop links silent past ``ha_housekeeping_ms``; suspend (not counted
        in sync) those silent past three heartbeats. A gap between rounds
        longer than a heartbeat is this master's own (stopped, starved, one
        long turn): it read no report then, so that time is not its slaves'
        silence, and a link is judged on what it said outside it."""
        cfg = self.config
        gap = now - self._last_round if self._last_round is not None else 0.0
        self._last_round = now
        if gap > cfg.ha_heartbeat_ms / 1000:
            log.warning("this master did not look at its replication links for %.1f s "
                        "(stopped or starved): that time is not counted as its slaves' "
                        "silence", gap)
            for link in self.links.values():
                link.last_heard = min(now, link.last_heard + gap)
        for identity, link in list(self.links.items()):
            silent = now - link.last_heard
            if silent > cfg.ha_housekeeping_ms / 1000:
                log.warning("replication link to slave %d silent for %.1f s: dropped",
                            link.broker_id, silent)
                del self.links[identity]
            elif silent > 3 * cfg.ha_heartbeat_ms / 1000:
                link.state = next_state(link.state, "silence")

    # ------------------------------------------------------------ derived
    def in_sync_ids(self, visible: int = 0) -> list[int]:
        """The slaves in sync by their links. One that ZooKeeper does not
        list yet counts only once it holds ``visible`` (what consumers may
        read): listed, an election could pick it (Kafka adds a follower to
        the ISR only at the high watermark)."""
        end = self.store.commitlog.max_offset
        listed = (self.isr or frozenset()) | self.isr_writing
        return [link.broker_id for link in self.links.values()
                if link.state is HaState.TRANSFER
                and in_sync(link.acked_offset, end, self.config.ha_max_gap_bytes)
                and (link.broker_id in listed or link.acked_offset >= visible)]

    def in_sync_acked(self, listed: bool = True) -> list[int]:
        """What each slave that counts for acks holds: in sync by its link and,
        once the controller publishes the in-sync set, listed in it (a slave
        that ZooKeeper does not list could not be elected, so a record only it
        holds is not safe). ``listed=False``: every link in sync."""
        end = self.store.commitlog.max_offset
        isr = self.isr if listed else None
        return [link.acked_offset for link in self.links.values()
                if link.state is HaState.TRANSFER
                and in_sync(link.acked_offset, end, self.config.ha_max_gap_bytes)
                and (isr is None or link.broker_id in isr)]

    def isr_held_offset(self) -> int | None:
        """What every slave of the published in-sync set holds, by its live
        link of this epoch (None: no set published, or a listed slave has no
        link): a master whose lease lapsed acks only up to here, so whichever
        of them an election picks holds every acked write. A set being
        written counts too (ZooKeeper may list it though the write's answer
        was lost). A set of the master alone: its whole log (nobody else
        could be elected)."""
        if self.isr is None:
            return None
        me = self.config.broker_id
        held = {link.broker_id: link.acked_offset for link in self.links.values()
                if link.state is HaState.TRANSFER}
        wanted = [b for b in self.isr | self.isr_writing if b != me]
        if any(b not in held for b in wanted):
            return None
        return min((held[b] for b in wanted), default=self.store.commitlog.max_offset)

    def replicated_offset(self) -> int | None:
        """The offset SYNC writes may be acked up to (None: too few slaves in
        sync): ``protocol.ack_point`` with ``sync_replicas`` and ``min_sync_replicas``."""
        return self.ack_state()[0]

    def ack_state(self) -> tuple[int | None, int]:
        """(``replicated_offset()``, ``in_sync_count()``) from one pass over the links."""
        cfg = self.config
        me = cfg.broker_id
        counted = self.in_sync_acked()
        isr_acked = [self.last_acked.get(b, 0) for b in self.isr or () if b != me]
        return ack_point(counted, isr_acked, self.store.commitlog.max_offset,
                         cfg.sync_replicas, cfg.min_sync_replicas), len(counted)

    def in_sync_count(self) -> int:
        return len(self.in_sync_acked())

    def slaves_available(self) -> bool:
        """Enough slaves in sync by their links to take a SYNC write: one that
        ZooKeeper does not list yet (it just caught up) makes the write wait
        for its listing, not fail with SLAVE_NOT_AVAILABLE."""
        cfg = self.config
        return required_acks(len(self.in_sync_acked(listed=False)), cfg.sync_replicas,
                             cfg.min_sync_replicas) is not None

    def status(self) -> tuple[LinkStatus, ...]:
        end = self.store.commitlog.max_offset
        return tuple(LinkStatus(link.broker_id, link.address, link.state.value, link.max_offset,
                                link.acked_offset, end - link.acked_offset)
                     for link in self.links.values())
