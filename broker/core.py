"""What request handlers and role changes work on: the broker's state, its
store and services, the current role's parts, with the questions handlers
ask of them. ``server.Broker`` extends it with the sockets and the loop.
Every attribute belongs to the serving thread but ``snapshot``, which it
publishes for the others."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from duomq import __version__
from duomq.auth.acl import Permission
from duomq.auth.guard import Guard
from duomq.auth.quotas import Quotas, UsageBook
from duomq.broker import role_switch
from duomq.broker.answers import AnswerBook
from duomq.broker.health import BrokerHealth
from duomq.broker.metrics import BrokerMetrics
from duomq.broker.pull_hold import PullRequestHoldService
from duomq.broker.role_parts import RoleParts
from duomq.broker.snapshot import BrokerSnapshot
from duomq.broker.state import BrokerState
from duomq.common.config import BrokerConfig, FlushDiskType, ReplicationMode
from duomq.common.errors import AuthorizationError
from duomq.common.memory import usable_memory
from duomq.common.role import Role
from duomq.controller.registry import BrokerRegistry
from duomq.coordinator.nodes import MemberNode
from duomq.flush.services import FlushService
from duomq.share.book import ShareFollower
from duomq.share.pop_hold import PopHoldService
from duomq.store import MessageStore
from duomq.store.consumer_offsets import ConsumerOffsetManager
from duomq.timer.indexer import TimerIndexer


@dataclass
class Client:
    """A client as its heartbeats describe it."""
    seen: float                    # last heard (monotonic)
    producer_groups: list[str]
    consumer_groups: list[str]
    connection: bytes              # its ROUTER identity
    user: str | None = None        # the user it authenticated as (auth = true)


class BrokerCore:
    def __init__(self, config: BrokerConfig):
        self.config = config
        self.state = BrokerState()
        self.store = MessageStore(config)
        self.offsets = ConsumerOffsetManager(os.path.join(config.data_dir, "consumer_offsets.json"))
        self.pull_hold = PullRequestHoldService()
        self.pop_hold = PopHoldService()         # POPs waiting for messages (share/handlers.py)
        self.share_follower = ShareFollower()    # a slave's copy of the share groups' state
        # the timer messages by when they come due, on every role (``timer.indexer``)
        self.timer_indexer = TimerIndexer.of(config)
        self.sync_flush = config.flush is FlushDiskType.SYNC_FLUSH
        self.sync_replication = config.replication is ReplicationMode.SYNC
        self.clients: dict[str, Client] = {}     # by user and client id (client_key)
        self.guard: Guard | None = None     # auth = true: who may do what
        self.usage = UsageBook()            # ... and what each user uses (auth.quotas)
        self.quotas = Quotas(config.quota_groups, config.quota_share_groups,
                             config.quota_held_pops, config.quota_open_transactions,
                             config.quota_clients, config.quota_connections)
        # auth = true: makes the ZooKeeper nodes of consumer groups a client
        # names, for its clients to join (``auth.zk_keeper``; any thread)
        self.group_nodes: Callable[[Iterable[str]], None] | None = None
        self.metrics = BrokerMetrics()
        # when each answer leaves, and what a send left for after its ack
        # (the dispatcher's; ``broker.answers``)
        self.answers = AnswerBook(self.metrics)
        # queues written to whose entries are not all visible yet: (topic,
        # queue) -> end (``visibility``)
        self.pending_queues: dict[tuple[str, int], int] = {}
        self.total_memory = usable_memory()      # the machine's, or a pod's limit
        # what only the current role has: swapped on every role change
        # (``role_switch``); a slave following nobody until the election says
        self.parts: RoleParts = role_switch.following_nobody()
        # what other threads read of this broker (``snapshot``): published by
        # the serving thread, replaced whole
        self.snapshot = BrokerSnapshot()
        self.registry: BrokerRegistry | None = None
        # topic -> queues this group hosts: the registry's watches once it runs
        self.hosted_topics: Callable[[], Mapping[str, int]] = dict
        self.flush_service: FlushService | None = None
        self.public_key = ""        # the CURVE key the ports serve with (auth = true), Z85

    # ------------------------------------------------------------ questions
    def hosted_queues(self, topic: str) -> int | None:
        """The number of queues this broker group hosts of ``topic`` (None: none)."""
        return self.hosted_topics().get(topic)

    def producers(self, group: str, topic: str) -> list[bytes]:
        """The connections of the producers of ``group`` heard from lately
        (their heartbeats) whose user may publish to ``topic``: a check-back
        carries a message of it."""
        pub = (Permission("Topic", topic, "Pub"),)
        return [c.connection for c in self.clients.values()
                if group in c.producer_groups and self.lacks(c.user, pub) is None]

    def admit(self, user: str | None, kind: str, name: str) -> None:
        """Count ``name`` (a group, a client id, a connection) as used by ``user``, or QuotaExceededError
        when its quota of ``kind`` is used up (``auth.quotas``; nothing is
        counted without auth or for the broker's own key)."""
        if self.guard is None or user is None:
            return
        self.usage.admit(user, kind, name, self.quota(user, kind), time.monotonic())

    def quota(self, user: str, kind: str) -> int:
        """``user``'s quota of ``kind``: its own, else this broker's default."""
        known = self.guard.users.user(user) if self.guard is not None else None
        own = dict(known.quotas) if known is not None else {}
        return own.get(kind, getattr(self.quotas, kind))

    def lacks(self, user: str | None, needed) -> Permission | None:
        """The first of ``needed`` that ``user`` lacks (None: it has them
        all, or this broker checks no rights)."""
        if self.guard is None or user is None:
            return None
        return self.guard.lacking(user, tuple(needed))

    def require(self, user: str | None, needed) -> None:
        """AuthorizationError unless ``user`` has every permission of
        ``needed``: the checks that depend on what a request touches."""
        lacking = self.lacks(user, needed)
        if lacking is not None:
            raise AuthorizationError(f"user {user!r} lacks the permission {lacking}")

    def master_address(self) -> str | None:
        return self.registry.master_address() if self.registry else None

    def master_id(self) -> int | None:
        m = self.registry.master if self.registry else None
        return m.broker_id if m else None

    @property
    def role(self) -> Role:
        return self.parts.role

    def writable(self) -> bool:
        """A master that takes writes: not handing over, and holding its lease
        or able to ack without it (``MasterParts.writable``)."""
        return self.parts.writable(time.monotonic())

    def epoch_history(self) -> tuple[tuple[int, int], ...]:
        """The group's epochs and their start offsets, as the HA controller
        last read them from ZooKeeper (``()``: not read, or no controller)."""
        controller = getattr(self, "controller", None)
        return controller.epoch_history if controller is not None else ()

    def not_writable_reason(self) -> str:
        cfg = self.config
        return self.parts.why_not_writable(f"broker {cfg.group}/{cfg.broker_id}",
                                           self.master_address())

    def replication_lag(self) -> int:
        """A slave: bytes its master holds that it does not (as last heard)."""
        return self.parts.lag_bytes(self.store.commitlog.max_offset)

    def refetching(self) -> bool:
        """Recovery cut damaged data that valid data followed: until this
        broker holds that range again (fetched from its group), it may have
        lost acknowledged messages and must not be master."""
        report = self.store.recovery
        return report is not None and report.damaged and \
            self.store.commitlog.max_offset < report.damaged_until

    def health(self) -> BrokerHealth:
        parts, st, now = self.parts, self.state, time.monotonic()
        return BrokerHealth(
            role=parts.role, following=parts.following, lease_valid=parts.lease_valid(now),
            acks_without_lease=parts.acks_without_lease(), draining=parts.draining,
            epoch=st.epoch, lag_bytes=self.replication_lag(),
            master_silent_s=parts.master_silent_s(now), cannot_write=self.store.cannot_write)

    def member_info(self) -> MemberNode:
        """This broker's member node, from the last published snapshot (read
        by the registry's and the controller's threads)."""
        cfg, s = self.config, self.snapshot
        node = MemberNode(
            cfg.broker_id, group=cfg.group, address=cfg.address, ha_address=cfg.ha_address,
            role=s.role, epoch=s.epoch, stepping_down=s.stepping_down,
            flush=cfg.flush.value, replication=cfg.replication.value,
            max_ack_wait_ms=cfg.max_ack_wait_ms, pid=os.getpid(), version=__version__,
            data_dir=os.path.abspath(cfg.data_dir), max_offset=s.max_offset,
            confirmed_offset=s.confirmed_offset, promotable=s.promotable, auth=cfg.auth,
            public_key=self.public_key,     # clients and slaves pick the key to expect by it
            metrics=f"http://{cfg.advertised_host or cfg.listen_host}:{cfg.metrics_port}/metrics"
            if cfg.metrics_port > 0 else "",
            recovery=s.recovery, listen_host=cfg.listen_host, cannot_write=s.cannot_write,
            external_address=cfg.external_address)
        if s.following:
            node = replace(node, master_max_offset=s.master_max_offset, lag_bytes=s.lag_bytes,
                           lag_ms=s.lag_ms, replication_halted=s.replication_halted)
        return node
