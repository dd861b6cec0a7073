"""What the broker is, as the serving thread last published it: one frozen
value that other threads read instead of the store and the role's parts
(which only the serving thread touches). The HA controller reads its role,
epoch, log end and what it wants published; the member-info thread writes
it to ZooKeeper; a metrics scrape turns it into metric families.

``BrokerSnapshot`` is taken every housekeeping round (``housekeeping_interval_ms``) and
at once after a role change; ``QueueSnapshot``, each queue's end and every
consumer group's lag (work that grows with the number of queues), only when
a scrape asks for it (``inbox.ScrapeWanted``)."""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field

from duomq.common.role import Role
from duomq.format import record as rec
from duomq.master.parts import LinkStatus
from duomq.store.residency import tail_residency


@dataclass(frozen=True)
class BrokerSnapshot:
    taken_at: float = 0.0              # monotonic s
    role: Role = Role.SLAVE
    epoch: int = 0                     # the epoch led or followed
    local_epoch: int = 0               # the epoch on disk
    stepping_down: bool = False
    draining: bool = False
    drained: bool = False              # a draining master ready to hand over
    min_offset: int = 0                # the commit log kept
    max_offset: int = 0
    flushed_offset: int = 0
    confirmed_offset: int = 0          # what consumers may read up to
    segments: int = 0
    messages_stored: int = 0
    promotable: bool = True
    recovery: str = ""                 # a recovery that cut damaged data: what it found
    cannot_write: str = ""             # the store's last write failed (a full disk): why
    # a master
    in_sync_replicas: int = 0
    in_sync_ids: frozenset[int] | None = None   # what the links find in sync (None: a slave)
    acks_possible: bool = True         # enough slaves in sync for a SYNC write
    degraded: bool = False
    replicated_offset: int = 0         # SYNC writes may be acked up to here (-1: too few slaves)
    links: tuple[LinkStatus, ...] = ()
    transactions_pending: int = 0
    timers_pending: dict[str, int] = field(default_factory=dict)   # topic -> timers not fired
    # share groups: group -> (messages held, deliveries past the first, moved to the DLQ)
    share: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    # a slave
    following: bool = False
    master_max_offset: int = 0
    lag_bytes: int = 0
    lag_ms: int = -1
    replication_halted: str = ""
    # counted by the serving thread
    redirects: int = 0                 # pulls answered with advice to read elsewhere
    bad_requests: int = 0
    # the client port when it is the broker's own (``Port.connections``;
    # libzmq's ROUTER counts none: None): (open now, accepted, closed for breaking ZMTP)
    client_connections: tuple[int, int, int] | None = None
    replication_connections: tuple[int, int, int] | None = None   # the same of the ha_port


def take(b) -> BrokerSnapshot:
    """The broker ``b`` (a ``core.BrokerCore``) now: the serving thread only."""
    store, st, parts = b.store, b.state, b.parts
    log = store.commitlog
    report = store.recovery
    common = dict(
        taken_at=time.monotonic(), role=parts.role, epoch=st.epoch,
        local_epoch=store.epoch_file.read(), stepping_down=st.stepping_down,
        drained=st.stepping_down, min_offset=log.min_offset,
        max_offset=log.max_offset, flushed_offset=st.flushed_offset,
        confirmed_offset=st.visible_offset, segments=len(log.mfq.segments),
        messages_stored=store.messages_stored, redirects=st.redirects,
        bad_requests=st.bad_requests, client_connections=_connections(b, "router"),
        replication_connections=_connections(b, "ha_router"),
        promotable=b.config.promotable and not b.refetching(),
        recovery=str(report) if report is not None and report.damaged else "",
        cannot_write=store.cannot_write)
    return BrokerSnapshot(**common, **parts.snapshot_fields(st.visible_offset, log.max_offset))


def _connections(b, port: str) -> tuple[int, int, int] | None:
    p = getattr(b, port, None)            # (a core without ports: none)
    return p.connections() if p is not None else None


@dataclass(frozen=True)
class QueueSnapshot:
    """Per queue and consumer group: what a scrape shows (metrics_per_queue)."""
    taken_at: float = 0.0
    queue_ends: dict[tuple[str, int], int] = field(default_factory=dict)
    # (group, topic, queue) -> (messages not committed past, age of the oldest in s)
    lag: dict[tuple[str, str, int], tuple[int, float]] = field(default_factory=dict)
    tail_resident: float | None = None   # the commit log's tail in the page cache


def take_queues(b) -> QueueSnapshot:
    """Each queue's end and each consumer group's lag (on a master: offsets
    are committed there), read from the store: the serving thread only."""
    store, visible = b.store, b.state.visible_offset
    ends = {key: store.visible_max_offset(cq, visible) for key, cq in store.queues.items()}
    lag: dict[tuple[str, str, int], tuple[int, float]] = {}
    if b.parts.leads:                      # the offsets committed are the master's
        now_ms = time.time() * 1000
        for (group, topic, qid), committed in b.offsets.items():
            cq = store.find_queue(topic, qid)
            if cq is None or committed < 0:
                continue
            start = max(committed, cq.min_offset)
            behind = max(0, ends.get((topic, qid), 0) - start)
            lag[(group, topic, qid)] = (behind, _age_s(store, cq, start, now_ms) if behind else 0.0)
    log = store.commitlog
    return QueueSnapshot(time.monotonic(), ends, lag, tail_residency(log.mfq, log.max_offset))


def _age_s(store, cq, queue_offset: int, now_ms: float) -> float:
    """Seconds since the message at ``queue_offset`` was stored."""
    entry = cq.entry(queue_offset)
    head = store.commitlog.read(entry[0], rec.HEADER_SIZE) if entry else None
    if head is None:
        return 0.0
    (ts,) = rec.STORE_TS.unpack_from(head, 0)
    return max(0.0, (now_ms - ts) / 1000)


def lag_by_topic(q: QueueSnapshot) -> tuple[dict[tuple[str, str], int],
                                             dict[tuple[str, str], float]]:
    """(topic, group) -> messages behind, and -> the oldest one's age."""
    behind: dict[tuple[str, str], int] = defaultdict(int)
    age: dict[tuple[str, str], float] = defaultdict(float)
    for (group, topic, _qid), (n, a) in q.lag.items():
        behind[(topic, group)] += n
        age[(topic, group)] = max(age[(topic, group)], a)
    return behind, age
