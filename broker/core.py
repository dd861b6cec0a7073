"""What request handlers and role changes work on: the broker's state and
its parts, with the questions handlers ask of them. ``server.Broker``
extends it with the sockets and the loop; every attribute belongs to the
serving thread."""

from __future__ import annotations

import os
import time
from dataclasses import replace

from duomq import __version__
from duomq.broker.metrics import BrokerMetrics
from duomq.broker.state import BrokerState
from duomq.common.config import BrokerConfig, FlushDiskType, ReplicationMode
from duomq.common.delay import parse_levels
from duomq.common.memory import usable_memory
from duomq.common.role import Role
from duomq.coordinator.nodes import MemberNode
from duomq.coordinator.registry import BrokerRegistry
from duomq.flush.services import FlushService
from duomq.master.ack_waiters import NEVER, AckWaiter, AckWaiters
from duomq.master.group_topics import GroupTopics
from duomq.master.health import BrokerHealth
from duomq.master.offsets import ConsumerOffsetManager
from duomq.master.pull_hold import PullRequestHoldService
from duomq.master.queue_locks import QueueLocks
from duomq.master.schedule import ScheduleService
from duomq.master.transactions import TransactionService
from duomq.proto import pb
from duomq.replication.ha_client import HAClient
from duomq.replication.ha_service import HAService
from duomq.store import MessageStore


class BrokerCore:
    def __init__(self, config: BrokerConfig):
        self.config = config
        self.state = BrokerState()
        self.store = MessageStore(config)
        self.offsets = ConsumerOffsetManager(os.path.join(config.data_dir, "consumer_offsets.json"))
        self.pull_hold = PullRequestHoldService()
        self.ack_waiters = AckWaiters()
        self.queue_locks = QueueLocks()
        self.delay_levels = parse_levels(config.message_delay_level)
        self.sync_flush = config.flush is FlushDiskType.SYNC_FLUSH
        self.sync_replication = config.replication is ReplicationMode.SYNC
        # client id -> (last heard, producer groups, consumer groups, its connection)
        self.clients: dict[str, tuple[float, list[str], list[str], bytes]] = {}
        self.metrics = BrokerMetrics()
        self.total_memory = usable_memory()      # the machine's, or a pod's limit
        # parts that come and go with the role or with start()
        self.schedule: ScheduleService | None = None    # master
        self.group_topics: GroupTopics | None = None     # consumer groups' retry/DLQ topics
        self.transactions: TransactionService | None = None   # master
        self.ha: HAService | None = None                # master: the links to slaves
        self.ha_client: HAClient | None = None          # slave: the link to the master
        self.registry: BrokerRegistry | None = None
        self.flush_service: FlushService | None = None
        self.public_key = ""        # the CURVE key the ports serve with (auth = true), Z85

    # ------------------------------------------------------------ questions
    def hosted_queues(self, topic: str) -> int | None:
        return self.registry.topics.get(topic) if self.registry else None

    def producers(self, group: str) -> list[bytes]:
        """The connections of the producers of ``group`` heard from lately
        (their heartbeats), for check-backs."""
        return [conn for _seen, groups, _c, conn in self.clients.values() if group in groups]

    def master_address(self) -> str | None:
        return self.registry.master_address() if self.registry else None

    def master_id(self) -> int | None:
        m = self.registry.master if self.registry else None
        return m.broker_id if m else None

    def writable(self) -> bool:
        return self.state.writable(time.monotonic())

    def not_writable_reason(self) -> str:
        st = self.state
        if st.role != Role.MASTER:
            return f"broker {self.config.group}/{self.config.broker_id} is a slave; the " \
                   f"master is at {self.master_address() or 'unknown'}"
        if st.draining:
            return "the master is handing over to a slave (planned switchover)"
        return "the master's ZooKeeper lease has lapsed: not accepting writes"

    def slaves_available(self) -> bool:
        return self.ha is not None and self.ha.slaves_available()

    def replication_lag(self) -> int:
        """A slave: bytes its master holds that it does not (as last heard)."""
        return max(0, self.ha_client.master_max - self.store.commitlog.max_offset) \
            if self.ha_client is not None else 0

    def refetching(self) -> bool:
        """Recovery cut damaged data that valid data followed: until this
        broker holds that range again (fetched from its group), it may have
        lost acknowledged messages and must not be master."""
        report = self.store.recovery
        return report is not None and report.damaged and \
            self.store.commitlog.max_offset < report.damaged_until

    def health(self) -> BrokerHealth:
        following = self.ha_client is not None
        heard = self.ha_client.last_received if self.ha_client is not None else 0.0
        now = time.monotonic()
        st = self.state
        return BrokerHealth(
            role=st.role, following=following, lease_valid=st.lease_valid(now),
            draining=st.draining, epoch=st.epoch, lag_bytes=self.replication_lag(),
            master_silent_s=now - heard if heard else -1.0)

    def member_info(self) -> MemberNode:
        """This broker's member node (read by the registry's threads)."""
        cfg, st = self.config, self.state
        report = self.store.recovery
        client = self.ha_client
        node = MemberNode(
            cfg.broker_id, group=cfg.group, address=cfg.address, ha_address=cfg.ha_address,
            role=st.role, epoch=st.epoch, stepping_down=st.stepping_down,
            flush=cfg.flush.value, replication=cfg.replication.value,
            max_ack_wait_ms=cfg.max_ack_wait_ms, pid=os.getpid(), version=__version__,
            data_dir=os.path.abspath(cfg.data_dir), max_offset=self.store.commitlog.max_offset,
            confirmed_offset=st.visible_offset,
            promotable=cfg.promotable and not self.refetching(), auth=cfg.auth,
            public_key=self.public_key,     # clients and slaves pick the key to expect by it
            metrics=f"http://{cfg.advertised_host or cfg.listen_host}:{cfg.metrics_port}/metrics"
            if cfg.metrics_port > 0 else "",
            recovery=str(report) if report is not None and report.damaged else "")
        if client is not None:
            node = replace(node, master_max_offset=client.master_max,
                           lag_bytes=self.replication_lag(), lag_ms=client.lag_ms(),
                           replication_halted=client.halted)
        return node

    def degraded(self) -> bool:
        """A SYNC master acking with fewer slaves than sync_replicas."""
        return self.sync_replication and self.state.in_sync_replicas < self.config.sync_replicas

    def mark_replicas(self, resp) -> None:
        """Say on a send's answer how many slaves were in sync when it was acked."""
        resp.in_sync_replicas = self.state.in_sync_replicas
        resp.degraded = self.degraded()

    # ------------------------------------------------------------ deferred answers
    def ack_waiter(self, end_offset: int, identity: bytes, request_id: int, resp,
                   type_: int = pb.SEND) -> bool:
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
            identity, request_id, resp, type_, now))
        return True
