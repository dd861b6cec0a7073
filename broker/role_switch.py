"""The serving thread carries out the HA controller's orders
(``controller.orders``): it swaps the role's parts (``master.parts``,
``slave.parts``), updates the state, answers what a demoted master owed, and
publishes a snapshot at once so that the controller sees the new role. The
decisions are the controller's; nothing here talks to ZooKeeper."""

from __future__ import annotations

import logging
import time
from typing import Any, Protocol

from duomq.broker.answers import AnswerBook
from duomq.broker.inbox import Flushed, ScrapeWanted, Wake
from duomq.broker.metrics import BrokerMetrics
from duomq.broker.role_parts import RoleParts
from duomq.broker.security import BrokerSecurity
from duomq.broker.state import BrokerState
from duomq.common.config import BrokerConfig
from duomq.controller.orders import (
    Demote,
    Drain,
    Follow,
    Halt,
    IsrPublished,
    IsrWriting,
    Lease,
    Promote,
)
from duomq.master.parts import MasterParts
from duomq.share.book import ShareFollower
from duomq.slave.parts import LinkCurve, SlaveParts, truncate
from duomq.store import MessageStore
from duomq.store.consumer_offsets import ConsumerOffsetManager
from duomq.timer.indexer import TimerIndexer
from duomq.transport.zsend import Sent

log = logging.getLogger(__name__)


class Seat(Protocol):
    """What a role change works on (``server.Broker`` is one): the core's
    state, store and parts, the answer book, and what the process holds
    beside them: its replication port, ZooKeeper session, security, and
    the snapshots it publishes."""
    config: BrokerConfig
    state: BrokerState
    store: MessageStore
    parts: RoleParts
    offsets: ConsumerOffsetManager
    metrics: BrokerMetrics
    share_follower: ShareFollower
    timer_indexer: TimerIndexer
    answers: AnswerBook

    @property
    def registry(self) -> Any: ...          # controller.registry.BrokerRegistry, once started

    @property
    def ha_router(self) -> Sent: ...

    @property
    def zk(self) -> Any: ...

    @property
    def security(self) -> BrokerSecurity | None: ...

    def publish(self) -> None: ...

    def publish_queues(self, wanted: ScrapeWanted) -> None: ...

    def slave_progress(self, confirmed: int) -> None: ...


def following_nobody() -> SlaveParts:
    """A broker's parts until its group's election says whom it follows."""
    return SlaveParts()


def _master(b: Seat) -> MasterParts | None:
    parts = b.parts
    return parts if isinstance(parts, MasterParts) else None


def carry_out(b: Seat, note: object) -> None:
    """One note of the inbox."""
    st = b.state
    match note:
        case Flushed(offset):
            st.flushed_offset = max(st.flushed_offset, offset)
        case Lease(until):
            m = _master(b)
            if m is not None:       # a slave acks nothing: a lease for a term that ended
                m.lease_until = until
        case Promote(epoch, isr, lease_until):
            promote(b, epoch, isr, lease_until)
        case Follow(epoch, cut):
            follow(b, epoch, cut)
        case Halt():
            if isinstance(b.parts, SlaveParts) and b.parts.following:
                b.parts.stop("about to claim the group: the log stops here")
                b.parts = following_nobody()
                b.publish()
        case Demote(why):
            demote(b, why)
        case Drain(on=True):
            drain_for_handover(b)
        case Drain(on=False):
            m = _master(b)
            if m is not None and m.draining and not st.stepping_down:
                log.info("switchover withdrawn: taking writes again")
                m.draining = False
                b.publish()
        case IsrWriting(members):
            m = _master(b)
            if m is not None:
                m.ha.isr_writing |= members
        case IsrPublished(members):
            m = _master(b)
            if m is not None:
                m.ha.isr = members
                m.ha.isr_writing = frozenset()
        case ScrapeWanted():
            b.publish_queues(note)
        case Wake():
            pass                 # the loop re-reads what moved
        case _:
            log.error("unknown note for the serving thread: %r", note)


def promote(b: Seat, epoch: int, isr: frozenset[int] | None, lease_until: float = 0.0) -> None:
    """Become master at ``epoch`` (the controller holds the master node,
    published the in-sync set ``isr`` and granted the lease ``lease_until``)."""
    b.parts.stop("promoted")
    m = MasterParts(b.store, b.config, epoch, b.offsets, b.ha_router, b.metrics, b.zk,
                    b.share_follower.hand_over(b.store), lease_until, b.timer_indexer)
    m.ha.isr = isr
    b.parts = m
    st = b.state
    st.flushed_offset = m.flushed_at_start
    st.epoch, st.stepping_down = epoch, False
    b.metrics.promotions += 1
    b.publish()
    log.info("serving as MASTER of %s at epoch %d from offset %d", b.config.group, epoch,
             b.store.commitlog.max_offset)


def demote(b: Seat, why: str) -> None:
    """Stop acking writes now; follow whoever is master next (a ``Follow`` order)."""
    m = _master(b)
    if m is None:
        return
    owed = m.stop(why)
    b.share_follower.reset()              # the master's book may hold what a cut takes
    b.parts = following_nobody()          # until a Follow order
    for w, status, error in owed:
        b.answers.reply(w.identity, w.request_id, w.type, status, error, w.response)
    b.publish()
    log.warning("serving as SLAVE: %s", why)


def follow(b: Seat, epoch: int, cut: int) -> None:
    """Follow the master of ``epoch``: truncate what the group does not share, then replicate."""
    st = b.state
    if _master(b) is not None:
        demote(b, f"broker of epoch {epoch} is master")
    b.parts.stop(f"following the master of epoch {epoch}")
    if truncate(b.store, epoch, cut):
        b.metrics.truncations += 1
        b.share_follower.reset()          # it may have applied ops the cut took
        b.timer_indexer.check(b.store)    # it may have indexed timers the cut took
        st.visible_offset = min(st.visible_offset, cut)
        st.flushed_offset = min(st.flushed_offset, cut)
    registry = b.registry
    assert registry is not None
    curve = None if b.security is None else LinkCurve(
        b.security.keys, b.security.trusted, registry.master_public_key)
    b.parts = SlaveParts.follow(b.store, b.config, epoch,
                                lambda: registry.master_ha_address(epoch),
                                b.slave_progress, b.offsets, curve, b.metrics.link_lost)
    st.epoch, st.stepping_down = epoch, False
    b.publish()


def drain_for_handover(b: Seat) -> None:
    """Planned switchover: refuse new writes; hand over once a slave holds
    all. A master that handed over is a slave stepping down: its snapshot
    says it is drained, and the controller releases the master node."""
    m = _master(b)
    if m is None:
        return
    if m.drain(time.monotonic(), b.state.visible_offset):
        log.info("switchover requested: draining writes")
    if m.ready_to_hand_over():
        b.state.stepping_down = True
        demote(b, "handed over by a planned switchover")
