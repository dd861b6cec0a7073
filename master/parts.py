"""What a broker has only while it is master, for one term (one epoch):
the replication links to its slaves (``ha_service``), the sends waiting for
their flush and replication (``ack_waiters``), delayed and retried messages
(``schedule``, ``requeue``), transactions, queue locks for orderly
consumers, and the consumer groups' retry and dead-letter topics
(``group_topics``). The serving thread makes one on promotion and drops it
on demotion (``broker.role_switch``); handlers reach master duties only
through it, so a slave has none of them by construction."""

from __future__ import annotations

import time

from duomq.common.config import BrokerConfig, FlushDiskType, ReplicationMode
from duomq.common.delay import parse_levels
from duomq.common.message import MessageExt
from duomq.common.role import Role
from duomq.master import requeue
from duomq.master.ack_waiters import NEVER, AckWaiter, AckWaiters
from duomq.master.group_topics import GroupTopics
from duomq.master.queue_locks import QueueLocks
from duomq.master.schedule import ScheduleService
from duomq.master.share_service import ShareService
from duomq.master.transactions import TransactionService
from duomq.proto import pb
from duomq.replication.ha_service import HAService, LinkStatus
from duomq.replication.read_advice import ADVICE_MIN_BEHIND, master_says_go_to_slave
from duomq.store.residency import window_residency
from duomq.store.share_book import ShareBook
from duomq.transport.zsend import Sent

__all__ = ["LinkStatus", "MasterParts"]


class MasterParts:
    role = Role.MASTER

    @staticmethod
    def on_writer(job) -> None:
        """Do ``job``, a write of the store: a master's writer is the serving
        thread, which calls this (``SlaveParts.on_writer``)."""
        job()

    def __init__(self, store, config: BrokerConfig, epoch: int, offsets,
                 ha_socket: Sent, counters, zk=None, share: ShareBook | None = None):
        """Own the log at ``epoch``: consume queues complete, the log
        fsynced, the epoch on disk; delayed messages and transactions resume
        from the progress the old master replicated; the replication links
        start afresh. ``zk``: the retry and dead-letter topics of the
        consumer groups heard from are created there (None: not at all).
        ``share``: the share groups' state as the slave kept it (None: the
        share log is replayed)."""
        store.dispatch()
        store.epoch = epoch          # stamped into every record this term writes (message ids)
        self.flushed_at_start = store.commitlog.flush()
        # all the group holds now: readable from this term's first turn
        self.start_offset = store.commitlog.max_offset
        store.epoch_file.write(epoch)
        self.store = store
        self.config = config
        self.epoch = epoch
        self.delay_levels = parse_levels(config.message_delay_level)
        self.sync_flush = config.flush is FlushDiskType.SYNC_FLUSH
        self.sync_replication = config.replication is ReplicationMode.SYNC
        self.schedule = ScheduleService(store, offsets, self.delay_levels, config.group)
        self.transactions = TransactionService(store, offsets, self.delay_levels, config.group,
                                               counters)
        self.transactions.catch_up()     # the pending transactions, as the old master left them
        self.ha = HAService(store, config, ha_socket, epoch, offsets)
        self.share = ShareService(store, config, share)  # share groups
        self.ack_waiters = AckWaiters()
        self.queue_locks = QueueLocks()  # holders take their queues again on renewal
        self.group_topics = GroupTopics(zk, config.cluster, config.group) \
            if zk is not None else None
        if self.group_topics is not None:
            self.group_topics.start()

    # ------------------------------------------------------------ the term's end
    def stop(self, why: str) -> list[tuple[AckWaiter, int, str]]:
        """The term ends (demoted, or the broker stops): the answers owed to
        the writes still waiting for their conditions. They are stored here
        but not confirmed, so they may be lost."""
        if self.group_topics is not None:
            self.group_topics.stop_soon()
        return [(w, pb.FLUSH_SLAVE_TIMEOUT,
                 f"the master stepped down ({why}) before this send was confirmed; it is "
                 f"stored here but may be lost") for w in self.ack_waiters.drain()]

    def ready_to_hand_over(self, since: float) -> bool:
        """A draining master may hand over once a transferring slave holds
        all it wrote, by a report sent since the drain began (``since``,
        monotonic s: a hung slave whose last report was in sync would take
        the master node and leave the group without one until its session
        expired), and no send waits for its conditions."""
        return len(self.ack_waiters) == 0 and \
            self.ha.heard_holding(self.store.commitlog.max_offset, since)

    def ask_reports(self, now: float, confirmed: int) -> None:
        """Every slave asked for a report at once (a hand-over began)."""
        self.ha.ask_reports(now, confirmed)

    # ------------------------------------------------------------ acks
    def conditions(self, flushed: int, replicated: int, leased: bool) -> tuple[float, float]:
        """The offsets the waiting writes' conditions have reached (NEVER for
        a condition not awaited). Without the lease (ZooKeeper unreachable,
        or slow to renew) a write is acked, in either replication mode, only
        once every slave of the published in-sync set holds it: the group's
        next master, whoever the election picks, then has it."""
        if not leased:
            held = self.ha.isr_held_offset()
            held = -1 if held is None else held
            if self.sync_replication:     # and the slaves SYNC asks for (a set of the master
                held = min(held, replicated)   # alone holds its whole log, but no slave does)
            return (flushed if self.sync_flush else NEVER, held)
        return (flushed if self.sync_flush else NEVER,
                replicated if self.sync_replication else NEVER)

    def acks_without_lease(self) -> bool:
        """Whether this master may take and ack writes while its lease
        cannot be renewed: only when an election could pick none but a slave
        of the published in-sync set (no ``allow_lagging_promotion``)."""
        return self.ha.isr is not None and not self.config.allow_lagging_promotion

    def wait_for_ack(self, end_offset: int, identity: bytes, request_id: int, response,
                     type_: int = pb.SEND, leased: bool = True, rewrite: bool = False) -> bool:
        """Register a write (a send, a send back, an end of transaction) that
        waits for its conditions; False when none applies (ack it now).
        Without the lease every write waits for the in-sync set. A
        ``rewrite`` of acked data (a send back, a share group's change) on a
        master the group is alone in (``alone``) waits for no slave: its
        source is as durable as it was, a slave that never saw it can only
        deliver a message again later."""
        alone = rewrite and self.alone()      # no election could pick another: none to wait for
        replicate = not alone and (self.sync_replication or not leased)
        if not (self.sync_flush or replicate):
            return False
        now = time.monotonic()
        cfg = self.config
        self.ack_waiters.add(AckWaiter(
            end_offset,
            now + cfg.sync_flush_timeout_ms / 1000 if self.sync_flush else NEVER,
            now + cfg.slave_timeout_ms / 1000 if replicate else NEVER,
            identity, request_id, response, type_, now))
        return True

    def alone(self) -> bool:
        """SYNC replication and ZooKeeper lists no slave in sync, nor is
        one being listed: no election could pick another broker, so what
        this master stores is all the group can have (``visible``)."""
        if not self.sync_replication or self.ha.isr is None:
            return False
        me = self.config.broker_id
        return not (self.ha.isr | self.ha.isr_writing) - {me}

    def slaves_missing(self) -> bool:
        """SYNC replication with fewer slaves in sync than min_sync_replicas:
        a write is stored but cannot be confirmed (SLAVE_NOT_AVAILABLE)."""
        return self.sync_replication and not self.ha.slaves_available()

    def degraded(self, in_sync_replicas: int) -> bool:
        """A SYNC master acking with fewer slaves than sync_replicas."""
        return self.sync_replication and in_sync_replicas < self.config.sync_replicas

    # ------------------------------------------------------------ what consumers see
    def visible(self, end: int, state) -> int:
        """What consumers may read of ``end`` (the dispatched log): the flushed
        offset under SYNC_FLUSH, the offset the slaves hold under SYNC
        replication, and from the term's first turn everything the master
        inherited (``start_offset``: the group's whole log once it took
        over, acked by the old master or not). Under SYNC replication with
        no slave to hold them, a master the group is ``alone`` in shows what
        it stores (its delayed messages come due, its retries, transaction
        commits, share redeliveries; sends answered SLAVE_NOT_AVAILABLE:
        stored and readable, as RocketMQ's), unless a slave is catching up
        to be listed: then it holds still until that slave has it all (a
        slave joins the in-sync set only holding the visible offset,
        ``HAService.in_sync_ids``). Sets the state's replicated offset and
        in-sync count."""
        replicated, state.in_sync_replicas = self.ha.ack_state()
        if not state.lease_valid(time.monotonic()):     # as acks are: the in-sync set holds it
            held = self.ha.isr_held_offset()
            replicated = None if held is None or replicated is None else min(replicated, held)
        state.replicated_offset = replicated if replicated is not None else -1
        visible = end
        if self.sync_flush:
            visible = min(visible, state.flushed_offset)
        if self.sync_replication:
            if replicated is not None:
                visible = min(visible, replicated)
            elif not self.alone() or self.ha.in_sync_ids():
                visible = 0
        return max(visible, self.start_offset)

    def read_advice(self, phys: int, total_memory: int) -> int | None:
        """The slave a pull at commit-log offset ``phys`` should go to: an
        in-sync one when the backlog there is cold (its page-cache residency)
        or, where residency cannot be told, deeper than
        ``access_in_memory_max_ratio`` of memory (RocketMQ's rule)."""
        behind = self.store.commitlog.max_offset - phys
        if behind < ADVICE_MIN_BEHIND:
            return None
        slaves = self.ha.in_sync_ids()
        if not slaves:
            return None
        # decided before the read, which would warm the pages it probes
        resident = window_residency(self.store.commitlog.mfq, phys, behind)
        go = master_says_go_to_slave(behind, total_memory, self.config.access_in_memory_max_ratio,
                                     resident, True)
        return min(slaves) if go else None

    # ------------------------------------------------------------ delayed and requeued
    def placements(self, msgs: list[MessageExt], queue_id: int, now_ms: int,
                   user: str | None = None) -> list[tuple]:
        """Where each of a batch's messages is stored: a delayed one in its
        level's queue of the schedule topic, a transaction's half message in
        the half topic (marked with ``user``), the others in their queue."""
        return [requeue.schedule(m, queue_id, self.delay_levels, now_ms, user) for m in msgs]

    def sent_back(self, msg: MessageExt, group: str, max_reconsume_times: int,
                  delay_level: int, dead_letter: bool) -> tuple:
        """Where a message ``group`` failed goes: its retry topic (delayed) or
        its dead-letter topic; ``(topic, queue, record)``."""
        return requeue.send_back(msg, group, self.delay_levels, max_reconsume_times,
                                 delay_level, dead_letter)

    def heard(self, consumer_group: str) -> None:
        """A consumer group sent a message back or had one dead-lettered:
        its retry and dead-letter topics are made (once). Not on a
        heartbeat: every peek, admin command and idle consumer made two
        topics no message ever reached."""
        if self.group_topics is not None:
            self.group_topics.heard((consumer_group,))

    # ------------------------------------------------------------ status
    def links(self) -> tuple[LinkStatus, ...]:
        return self.ha.status()

    def describe(self, resp: pb.BrokerStatusResponse, in_sync_replicas: int) -> None:
        """A status answer's master fields."""
        resp.in_sync_replicas, resp.degraded = in_sync_replicas, self.degraded(in_sync_replicas)
        resp.transactions_pending = len(self.transactions.book.pending)
        resp.isr.extend(sorted(self.ha.isr or ()))
        for link in self.ha.status():
            resp.replicas.add(broker_id=link.broker_id, address=link.address, state=link.state,
                              acked_offset=link.acked_offset, lag_bytes=link.lag_bytes)
        self.share.describe(resp, int(time.time() * 1000))
