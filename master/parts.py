"""What a broker has only while it is master, for one term (one epoch):
the replication links to its slaves (``ha_service``), the sends waiting for
their flush and replication (``ack_waiters``), delayed and retried messages
(``schedule``, ``requeue``), transactions, queue locks for orderly
consumers, and the consumer groups' retry and dead-letter topics
(``group_topics``), and the term's state (its lease, a drain, the offset
its slaves confirm, how many are in sync). The serving thread makes one on
promotion and drops it on demotion (``broker.role_switch``); handlers
reach master duties only through it, so a slave has none of them by
construction. It answers every call of ``broker.role_parts.RoleParts``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from duomq.common.config import BrokerConfig, FlushDiskType, ReplicationMode
from duomq.common.delay import parse_levels
from duomq.common.message import MessageExt
from duomq.common.role import Role
from duomq.master import requeue
from duomq.master.ack_waiters import NEVER, AckWaiter, AckWaiters
from duomq.master.group_topics import GroupTopics
from duomq.master.queue_locks import QueueLocks
from duomq.master.schedule import ScheduleService
from duomq.master.timers import TimerService
from duomq.master.transactions import TransactionService
from duomq.proto import pb
from duomq.replication.ha_service import HAService, LinkStatus
from duomq.replication.read_advice import ADVICE_MIN_BEHIND, master_says_go_to_slave
from duomq.share.book import ShareBook, ShareFollower
from duomq.share.service import ShareService
from duomq.store.residency import window_residency
from duomq.timer.indexer import TimerIndexer
from duomq.transport.zsend import Sent

__all__ = ["AckWaiter", "LinkStatus", "MasterParts"]
SCHEDULE_INTERVAL_S = 0.02   # how often due delayed messages are looked for
TX_CHECK_ROUND_S = 1.0      # how often pending transactions are looked at for check-backs


class MasterParts:
    role = Role.MASTER
    leads = True
    offsets_move_here = True      # the serving thread writes and computes them
    following = False
    draining = False              # handing over (this term's: ``drain``)

    @staticmethod
    def on_writer(job) -> None:
        """Do ``job``, a write of the store: a master's writer is the serving
        thread, which calls this (``SlaveParts.on_writer``)."""
        job()

    def __init__(self, store, config: BrokerConfig, epoch: int, offsets,
                 ha_socket: Sent, counters, zk=None, share: ShareBook | None = None,
                 lease_until: float = 0.0, timer_indexer: TimerIndexer | None = None):
        """Own the log at ``epoch``: consume queues complete, the log
        fsynced, the epoch on disk; delayed messages and transactions resume
        from the progress the old master replicated; the replication links
        start afresh. ``zk``: the retry and dead-letter topics of the
        consumer groups heard from are created there (None: not at all).
        ``share``: the share groups' state as the slave kept it (None: the
        share log is replayed). ``lease_until``: the lease the controller
        granted with the claim (monotonic s). ``timer_indexer``: the timer
        index as this broker kept it (None: opened here)."""
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
        if timer_indexer is None:
            timer_indexer = TimerIndexer.of(config)
        self.timers = TimerService(store, offsets, timer_indexer, config, config.group, counters)
        self.transactions = TransactionService(store, offsets, self.delay_levels, config.group,
                                               counters)
        self.transactions.catch_up()     # the pending transactions, as the old master left them
        self.ha = HAService(store, config, ha_socket, epoch, offsets)
        self.share = ShareService(store, config, share)  # share groups
        self.ack_waiters = AckWaiters()
        self._waiting = self.ack_waiters.queue   # (``acks_waiting``: read every turn)
        self.queue_locks = QueueLocks()  # holders take their queues again on renewal
        self.group_topics = GroupTopics(zk, config.cluster, config.group) \
            if zk is not None else None
        if self.group_topics is not None:
            self.group_topics.start()
        # the term's state (the serving thread's)
        self.lease_until = lease_until   # monotonic; acks and takes writes only before it
        self.draining = False            # handing over: no new writes
        self.drain_started = 0.0         # when (monotonic s): only reports since count
        self.replicated_offset = -1      # SYNC writes may be acked up to here (-1: too few
                                         # slaves in sync)
        self.in_sync_replicas = 0        # slaves that count for SYNC acks now
        self._next_schedule = 0.0
        self._next_tx_check = 0.0

    def apply(self, config: BrokerConfig) -> None:
        self.config = config

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

    def ready_to_hand_over(self) -> bool:
        """A draining master may hand over once a transferring slave holds
        all it wrote, by a report sent since the drain began (a hung slave
        whose last report was in sync would take the master node and leave
        the group without one until its session expired), and no send
        waits for its conditions."""
        return len(self.ack_waiters) == 0 and \
            self.ha.heard_holding(self.store.commitlog.max_offset, self.drain_started)

    def ask_reports(self, now: float, confirmed: int) -> None:
        """Every slave asked for a report at once (a hand-over began)."""
        self.ha.ask_reports(now, confirmed)

    def drain(self, now: float, confirmed: int) -> bool:
        """A planned switchover: writes refused from now on, the slaves asked
        for reports; True when it began here (it was not draining)."""
        if self.draining:
            return False
        self.draining, self.drain_started = True, now
        self.ask_reports(now, confirmed)
        return True

    # ------------------------------------------------------------ the lease
    def lease_valid(self, now: float) -> bool:
        return now < self.lease_until

    def writable(self, now: float) -> bool:
        """Takes writes: not handing over, and holding its lease or able to
        ack without it (``acks_without_lease``)."""
        return not self.draining and (now < self.lease_until or self.acks_without_lease())

    def why_not_writable(self, who: str, master_address: str | None) -> str:
        if self.draining:
            return "the master is handing over to a slave (planned switchover)"
        return ("the master's ZooKeeper lease has lapsed and allow_lagging_promotion is on (or "
                "no in-sync set is published): not accepting writes")

    def master_duties(self, why: Callable[[], str]) -> MasterParts:
        return self

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
                     type_: int = pb.SEND, rewrite: bool = False) -> bool:
        """Register a write (a send, a send back, an end of transaction) that
        waits for its conditions; False when none applies (ack it now).
        Without the lease every write waits for the in-sync set. A
        ``rewrite`` of acked data (a send back, a share group's change) on a
        master the group is alone in (``alone``) waits for no slave: its
        source is as durable as it was, a slave that never saw it can only
        deliver a message again later."""
        now = time.monotonic()
        alone = rewrite and self.alone()      # no election could pick another: none to wait for
        replicate = not alone and (self.sync_replication or not self.lease_valid(now))
        if not (self.sync_flush or replicate):
            return False
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

    def degraded(self) -> bool:
        """A SYNC master acking with fewer slaves than sync_replicas."""
        return self.sync_replication and self.in_sync_replicas < self.config.sync_replicas

    def mark_replicas(self, resp) -> None:
        """Say on a send's answer how many slaves were in sync when it was acked."""
        resp.in_sync_replicas = self.in_sync_replicas
        resp.degraded = self.degraded()

    def acks_waiting(self) -> int:
        return len(self._waiting)

    def ready_acks(self, flushed: int, now: float) -> list[AckWaiter]:
        """The writes whose conditions now hold, their answers marked: under
        the quorum rule with the lease, else only what every slave of the
        in-sync set holds (a successor may exist, and it is one of them)."""
        if not self._waiting:
            return []
        leased = now < self.lease_until
        if not leased and not self.acks_without_lease():
            return []
        ready = self.ack_waiters.release(*self.conditions(flushed, self.replicated_offset,
                                                          leased))
        for w in ready:
            if w.type == pb.SEND:
                self.mark_replicas(w.response)
        return ready

    def overdue_acks(self, flushed: int, now: float) -> list[tuple[AckWaiter, int]]:
        """The writes past a deadline with their condition unmet."""
        if not self._waiting:
            return []
        return self.ack_waiters.expire(now, *self.conditions(
            flushed, self.replicated_offset, now < self.lease_until))

    # ------------------------------------------------------------ what consumers see
    def visible(self, end: int, flushed: int) -> int:
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
        ``HAService.in_sync_ids``). Sets the term's replicated offset and
        in-sync count."""
        replicated, self.in_sync_replicas = self.ha.ack_state()
        if not self.lease_valid(time.monotonic()):     # as acks are: the in-sync set holds it
            held = self.ha.isr_held_offset()
            replicated = None if held is None or replicated is None else min(replicated, held)
        self.replicated_offset = replicated if replicated is not None else -1
        visible = end
        if self.sync_flush:
            visible = min(visible, flushed)
        if self.sync_replication:
            if replicated is not None:
                visible = min(visible, replicated)
            elif not self.alone() or self.ha.in_sync_ids():
                visible = 0
        return max(visible, self.start_offset)

    def read_advice(self, phys: int, total_memory: int, master_id: int | None = None) -> int | None:
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

    @staticmethod
    def lag_refusal(bound_ms: int, who: str) -> tuple[int | None, tuple | None]:
        return None, None              # a master is behind no one

    @staticmethod
    def lag_bytes(local_end: int) -> int:
        return 0

    @staticmethod
    def master_silent_s(now: float) -> float:
        return -1.0

    # ------------------------------------------------------------ delayed and requeued
    def placements(self, msgs: list[MessageExt], queue_id: int, now_ms: int,
                   user: str | None = None) -> list[tuple]:
        """Where each of a batch's messages is stored: a delayed one in its
        level's queue of the schedule topic, a transaction's half message in
        the half topic (marked with ``user``), the others in their queue."""
        cap = self.config.timer_max_delay_ms
        return [requeue.schedule(m, queue_id, self.delay_levels, now_ms, user, cap) for m in msgs]

    def timers_batch(self, msgs: list[MessageExt], queue_id: int,
                     now_ms: int) -> tuple[bytes, list[int]] | None:
        """A batch of timers only, for the timer topic in one C loop, with
        each one's delivery time (None: ``placements`` places it)."""
        return requeue.timers_batch(msgs, queue_id, now_ms, self.config.timer_max_delay_ms,
                                    self.config.max_message_bytes)

    def timer_records(self, buf, count: int, topic: str, queue_id: int,
                      now_ms: int) -> tuple[bytes, list[int], list[int]] | None:
        """A batch of timers only, checked and rewritten still encoded (None:
        ``timers_batch`` or ``placements`` takes it)."""
        return requeue.timers_records(buf, count, topic, queue_id, now_ms,
                                      self.config.timer_max_delay_ms,
                                      self.config.max_message_bytes)

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

    def left_reader(self, group: str, client: str) -> None:
        self.share.left_reader(group, client)

    # ------------------------------------------------------------ the serving loop
    def pump(self, now: float, visible: int) -> None:
        """Send the slaves what they lack, and the confirmed offset when it
        moved (acks wait on reports: SYNC, or no lease)."""
        self.ha.pump(now, visible, self.draining or (
            len(self._waiting) > 0 and (self.sync_replication or now >= self.lease_until)))

    def linger_due(self) -> float | None:
        """When the loop must wake: a lingering transfer, or the next timer
        message due (while taking writes)."""
        due = self.ha.linger_due
        now = time.monotonic()
        if not self.writable(now):
            return due
        wait_ms = self.timers.next_due() - time.time_ns() // 1_000_000
        wake = now + max(0, wait_ms) / 1000
        return wake if due is None else min(due, wake)

    def on_replication(self, identity: bytes, data: bytes, now: float) -> None:
        self.ha.on_message(identity, data, now)

    def due_work(self, now: float, visible: int, producers: Callable[[str, str], list[bytes]],
                 send: Callable[[bytes, bytes], Any]) -> bool:
        """Delayed messages and timers that came due delivered (a timer at
        its time, between rounds too), pending transactions checked back
        (while taking writes); True when it wrote."""
        if not self.writable(now):
            return False
        now_ms = time.time_ns() // 1_000_000
        if now < self._next_schedule:         # between rounds: a timer that came due
            return self.timers.next_due() <= now_ms and bool(self.timers.pump(now_ms, visible))
        self._next_schedule = now + SCHEDULE_INTERVAL_S
        wrote = bool(self.schedule.pump(now_ms, visible))
        if self.timers.pump(now_ms, visible):
            wrote = True
        self.transactions.catch_up()
        if now >= self._next_tx_check:
            self._next_tx_check = now + TX_CHECK_ROUND_S
            if self.transactions.check(time.time_ns() // 1_000_000, producers, send,
                                       self.config):
                wrote = True
        self.transactions.commit_progress(visible)
        return wrote

    def housekeeping(self, now: float, store, follower: ShareFollower) -> None:
        self.ha.housekeeping(now)

    # ------------------------------------------------------------ status
    def links(self) -> tuple[LinkStatus, ...]:
        return self.ha.status()

    def describe(self, resp: pb.BrokerStatusResponse) -> None:
        """A status answer's master fields."""
        resp.replicated_offset = self.replicated_offset
        resp.in_sync_replicas, resp.degraded = self.in_sync_replicas, self.degraded()
        resp.transactions_pending = len(self.transactions.book.pending)
        resp.timers_pending.update(self.timers.pending())
        resp.isr.extend(sorted(self.ha.isr or ()))
        for link in self.ha.status():
            resp.replicas.add(broker_id=link.broker_id, address=link.address, state=link.state,
                              acked_offset=link.acked_offset, lag_bytes=link.lag_bytes)
        self.share.describe(resp, int(time.time() * 1000))

    def snapshot_fields(self, visible: int, log_end: int) -> dict[str, Any]:
        """The snapshot's master fields (``broker.snapshot``)."""
        return dict(in_sync_replicas=self.in_sync_replicas,
                    replicated_offset=self.replicated_offset,
                    in_sync_ids=frozenset(self.ha.in_sync_ids(visible)),
                    acks_possible=not self.sync_replication or self.ha.slaves_available(),
                    degraded=self.degraded(), links=self.links(),
                    transactions_pending=len(self.transactions.book.pending),
                    timers_pending=self.timers.pending(),
                    share=self.share.figures(), draining=self.draining)
