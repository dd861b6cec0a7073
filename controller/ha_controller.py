"""The HA controller: a thread per broker that decides and enacts its role.

Each cycle it reads its group once into a frozen view (``read_view``), runs
``ha_cycle.run_cycle`` on it, logs the sentence whenever it changes and
carries out the actions. Only this thread touches ZooKeeper for HA (claims,
the ISR, routes, releasing the master node); what the serving thread must do
goes to it as typed orders (``orders``: Promote, Follow, Demote, Drain,
Lease, IsrPublished) through ``post``. What the serving thread is comes back
as its published snapshot (``serving()``: role, epoch, log end, the in-sync
set its links want, whether it can ack, whether it handed over); it wakes a
cycle when any of that changes (``wake``), as do watches on the master node,
the members and the switchover node; otherwise a cycle runs every ``CYCLE_S``.

Fencing (``master_lease``): a master renews its master node every sixth of
``master_lease_ms`` with a transaction that fails once a later epoch exists,
and acks under its quorum rule for half the lease after each renewal it
started; its slaves read the node as often and presume it dead once it went
unrenewed for a whole lease while ZooKeeper answered them promptly, without
waiting for its session to end. A SIGSTOPped master wakes with an expired
lease, and its next renewal fails if a successor claimed. It steps down when
its renewal finds a successor, or when its session is lost.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from kazoo.client import KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, ZookeeperError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from duomq.common.role import Role
from duomq.controller import ha_cycle as hc
from duomq.controller.master_lease import MasterSilence, master_ack_lease_s, renew_period_s
from duomq.controller.orders import (
    Demote,
    Drain,
    Follow,
    Halt,
    IsrPublished,
    IsrWriting,
    Lease,
    Order,
    Promote,
    Serving,
)
from duomq.coordinator.nodes import (
    EpochNode,
    IsrNode,
    MasterNode,
    MemberNode,
    NodeError,
    SwitchoverNode,
)
from duomq.coordinator.paths import ZkPaths

log = logging.getLogger(__name__)


class HaController:
    CYCLE_S = 1.0

    def __init__(self, zk, config, registry, serving: Callable[[], Serving],
                 post: Callable[[Order], None]):
        self.zk = zk
        self.config = config
        self.epoch_history: tuple[tuple[int, int], ...] = ()   # (epoch, start offset), as read
        self.registry = registry
        self.paths = ZkPaths(config.cluster)
        self.serving = serving             # the serving thread's last snapshot
        self.post = post                   # an order to the serving thread
        self.memory = hc.Memory()          # this thread's only
        self.last_sentence = ""
        # the in-sync set as ZooKeeper now lists it (None until this broker wrote one)
        self.isr_published: frozenset[int] | None = None
        self._info_written: tuple[Role, int] | None = None
        self._bad_nodes: set[tuple[str, str]] = set()   # (path, problem) already logged
        self.lease_s = config.master_lease_ms / 1000
        self.renew_s = renew_period_s(self.lease_s)
        self.silence = MasterSilence(self.lease_s, self.renew_s)   # a slave's count
        self._term: tuple[int, bytes, int] | None = None   # master: (epoch, node, its version)
        self._master_bytes: bytes | None = None             # the node as last woken for
        self._member_seen: dict[int, tuple[tuple[int, int], float]] = {}   # id -> (key, since)
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ha-controller", daemon=True)
        self._lease_thread = threading.Thread(target=self._lease_loop, name="zk-lease",
                                              daemon=True)

    # ------------------------------------------------------------ lifecycle
    def start(self) -> None:
        g = self.config.group
        self.zk.add_listener(self._on_state)
        DataWatch(self.zk, self.paths.master(g), self._master_changed)
        ChildrenWatch(self.zk, self.paths.members(g), self._wakeup)
        DataWatch(self.zk, self.paths.switchover(g), self._wakeup)
        self._thread.start()
        self._lease_thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._wake.set()
        self._thread.join(5)

    def _wakeup(self, *_) -> bool:
        if self._stopped.is_set():
            return False
        self._wake.set()
        return True

    def _master_changed(self, data, _stat) -> bool:
        """The master node's watch: a cycle runs when its holder or epoch
        changes or it goes, not on every renewal (the data stays the same)."""
        if self._stopped.is_set():
            return False
        if data != self._master_bytes:
            self._master_bytes = data
            self._wake.set()
        return True

    def wake(self) -> None:
        """Run a cycle now: what the serving thread reports changed (any thread)."""
        self._wake.set()

    # ------------------------------------------------------------ threads
    def _run(self) -> None:
        wait: float | None = self.CYCLE_S
        while not self._stopped.is_set():
            self._wake.wait(wait)
            self._wake.clear()
            if self._stopped.is_set():
                return
            wait = self.CYCLE_S
            try:
                wake_in = self.run_once()
                if wake_in is not None:
                    wait = min(wait, max(wake_in, 0.001))
            except (ZookeeperError, NodeError) as exc:
                log.warning("HA cycle: %s: %s", type(exc).__name__, exc)
            except Exception:
                log.exception("HA cycle failed")

    def run_once(self) -> float | None:
        """One cycle: read, decide, log, act. Returns when to run again, if sooner."""
        view = self.read_view()
        cycle = hc.run_cycle(view, self.memory, time.monotonic(),
                             self.config.election_settle_ms / 1000)
        if cycle.sentence != self.last_sentence:
            log.info("HA: %s", cycle.sentence)
            self.last_sentence = cycle.sentence
        before, self.memory = self.memory, cycle.memory
        for action in cycle.actions:
            if not self._act(action):
                self.memory = replace(before, vacant_since=None)
                return 0.0
        serving = self.serving()
        if (serving.role, serving.epoch) != self._info_written:
            self._info_written = (serving.role, serving.epoch)
            self.registry.update_info()
        acks = serving.acks_possible or self.memory.role != Role.MASTER
        if acks != self.registry.acks_now:
            self.registry.set_acks_now(acks)
        wake_in = cycle.wake_in_s
        if self.memory.role != Role.MASTER:      # decide as soon as the master's lease ends
            left = self.silence.remaining_s(time.monotonic())
            if left is not None:
                wake_in = left + 0.001 if wake_in is None else min(wake_in, left + 0.001)
        return wake_in

    # ------------------------------------------------------------ the lease
    def _lease_loop(self) -> None:
        """Every ``renew_s``: a master renews its node, a slave reads it."""
        while not self._stopped.wait(self.renew_s):
            term = self._term
            try:
                if term is not None and self.memory.role == Role.MASTER:
                    self._renew(*term)
                else:
                    self._probe()
            except Exception:
                log.exception("master lease loop")

    def _probe(self) -> None:
        t0 = time.monotonic()
        try:
            stat = self.zk.exists_async(self.paths.master(self.config.group)).get(
                timeout=self.renew_s)
        except Exception:
            self.silence.failed(time.monotonic())
            return
        key = (stat.czxid, stat.version) if stat is not None else None
        self.silence.probed(key, t0, time.monotonic())

    def _renew(self, epoch: int, node: bytes, version: int) -> None:
        """One renewal: prove no later epoch exists (create and delete its
        node) and set the master node at the version this master last wrote,
        in one transaction; a lease for half of ``master_lease_ms`` from now
        on success. A successor, or the node gone, revokes the lease at once."""
        p, g = self.paths, self.config.group
        t0 = time.monotonic()
        tx = self.zk.transaction()
        tx.create(p.epoch(g, epoch + 1), b"")
        tx.delete(p.epoch(g, epoch + 1))
        tx.set_data(p.master(g), node, version=version)
        try:
            results = tx.commit_async().get(timeout=self.renew_s)
        except Exception:
            return                      # ZooKeeper away or slow: the lease runs out by itself
        failed = [r for r in results if isinstance(r, Exception)]
        if not failed:
            self._term = (epoch, node, results[-1].version)
            self.post(Lease(t0 + master_ack_lease_s(self.lease_s)))
            return
        if any(isinstance(r, BadVersionError) for r in failed) and self._still_mine(epoch):
            return                      # the node was rewritten by this broker: adopted
        why = "a later epoch was claimed" if any(isinstance(r, NodeExistsError)
                                                 for r in failed) else \
            "the master node is gone" if any(isinstance(r, NoNodeError) for r in failed) else \
            f"its renewal failed ({failed[0]!r})"
        log.error("master lease of epoch %d not renewed: %s", epoch, why)
        self._term = None
        self.post(Lease(0.0))
        self._wake.set()

    def _still_mine(self, epoch: int) -> bool:
        """After a version mismatch: the node still names this broker at
        ``epoch`` (rewritten here, ``_read_master``); renew at its version."""
        try:
            raw, stat = self.zk.get(self.paths.master(self.config.group))
            node = MasterNode.from_bytes(raw)
        except (NoNodeError, NodeError):
            return False
        if (node.broker_id, node.epoch) != (self.config.broker_id, epoch):
            return False
        if self._term is not None and stat.version != self._term[2]:
            log.info("master node of epoch %d is at version %d, written by this broker (a "
                     "renewal whose answer was lost): renewing from it", epoch, stat.version)
        self._term = (epoch, raw, stat.version)
        return True

    def _on_state(self, state) -> None:
        if state in (KazooState.SUSPENDED, KazooState.LOST):
            self.post(Lease(0.0))            # stop acking at once
        self._wake.set()

    # ------------------------------------------------------------ the view
    def read_view(self) -> hc.GroupView:
        cfg, g, p = self.config, self.config.group, self.paths
        s = self.serving()
        own = dict(me=cfg.broker_id, local_epoch=s.local_epoch, local_max_offset=s.max_offset,
                   allow_lagging_promotion=cfg.allow_lagging_promotion,
                   serving_role=s.role, serving_epoch=s.epoch, serving_following=s.following,
                   isr_wanted=s.in_sync_ids,
                   draining=s.draining, drained=s.drained)
        state = self.zk.state
        if state != KazooState.CONNECTED:
            return hc.GroupView(session=str(state), **own)
        members, silent, now = [], set(), time.monotonic()
        for child in self.zk.get_children(p.members(g)):
            try:
                raw, stat = self.zk.get(p.member(g, int(child)))
                members.append(MemberNode.from_bytes(raw, int(child)))
            except NoNodeError:
                continue
            except (NodeError, ValueError) as exc:
                self._bad_node(f"{p.members(g)}/{child}", exc, "ignored")
                continue
            if self._member_silent(int(child), (stat.czxid, stat.version), now):
                silent.add(int(child))
        if self.memory.role == Role.MASTER:       # the master owns the ISR: repair it
            isr = self._read(p.isr(g), IsrNode.from_bytes, "rewritten by the master")
            if isr is None and self.memory.isr_published:
                self._write_isr(self.memory.isr_published)
        else:                                # slaves: an election then weighs offsets only
            isr = self._read(p.isr(g), IsrNode.from_bytes, "read as absent")
        master, key = self._read_master()
        expired = master is not None and self.memory.role != Role.MASTER and \
            self.silence.expired(key, time.monotonic())     # a master renews its own
        epochs = self._read_epochs()
        # for lookups by message id (the serving thread reads it: one tuple swapped)
        self.epoch_history = tuple((e.epoch, e.start_offset) for e in epochs)
        return hc.GroupView(
            silent=frozenset(silent), master=master, master_expired=expired,
            master_version=key[1] if key is not None else None, members=tuple(members), isr=isr,
            epochs=epochs,
            switchover=self._read(p.switchover(g), SwitchoverNode.from_bytes, "ignored"),
            **own)

    def _member_silent(self, broker_id: int, key: tuple[int, int], now: float) -> bool:
        """A member's node is rewritten every second by a live broker
        (``MEMBER_INFO_INTERVAL_S``): one unchanged for a whole lease while
        ZooKeeper answered promptly is presumed dead (no candidate; see
        ``election.choose_master`` for why it may still be waited for)."""
        seen = self._member_seen.get(broker_id)
        if seen is None or seen[0] != key:
            self._member_seen[broker_id] = (key, now)
            return False
        return self.silence.unchanged_for(seen[1], now) >= self.lease_s

    def _read(self, path: str, parse, treatment: str):
        try:
            return parse(self.zk.get(path)[0])
        except NoNodeError:
            return None
        except NodeError as exc:
            self._bad_node(path, exc, treatment)
            return None

    def _read_master(self) -> tuple[MasterNode | None, tuple[int, int] | None]:
        """The master node and its (czxid, version). One that cannot be
        parsed but belongs to this broker's session while it is master is
        rewritten; anyone else's reads as held by an unknown broker (nobody
        follows it; it is replaced once its lease expires)."""
        path, cfg = self.paths.master(self.config.group), self.config
        try:
            raw, stat = self.zk.get(path)
            return MasterNode.from_bytes(raw), (stat.czxid, stat.version)
        except NoNodeError:
            return None, None
        except NodeError as exc:
            if stat.ephemeralOwner == self.zk.client_id[0] and self.memory.role == Role.MASTER:
                self._bad_node(path, exc, "rewritten: this broker holds it")
                node = MasterNode(cfg.broker_id, self.memory.epoch, cfg.address, cfg.ha_address)
                after = self.zk.set(path, node.to_bytes(), version=stat.version)
                return node, (after.czxid, after.version)
            self._bad_node(path, exc, "read as held by an unknown broker until it goes")
            return MasterNode.unreadable(), (stat.czxid, stat.version)

    def _read_epochs(self) -> tuple[EpochNode, ...]:
        """The group's epoch history. An epoch node that cannot be parsed
        keeps its place (its number is its name) with the start offset of the
        epoch before it: a returning broker then cuts its log at or below the
        true point, never above it."""
        p, g = self.paths, self.config.group
        found: dict[int, EpochNode | None] = {}
        for child in self.zk.get_children(p.epochs(g)):
            if not child.isdigit():
                continue
            try:
                found[int(child)] = EpochNode.from_bytes(int(child),
                                                         self.zk.get(p.epoch(g, int(child)))[0])
            except NoNodeError:
                continue
            except NodeError as exc:
                self._bad_node(p.epoch(g, int(child)), exc, "kept with the previous start offset")
                found[int(child)] = None
        epochs, start = [], 0
        for epoch in sorted(found):
            node = found[epoch]
            if node is None:
                node = EpochNode(epoch, -1, start)
            start = node.start_offset
            epochs.append(node)
        return tuple(epochs)

    def _bad_node(self, path: str, exc: Exception, treatment: str) -> None:
        """Log a node that cannot be parsed, once per path and problem."""
        key = (path, str(exc))
        if key not in self._bad_nodes:
            self._bad_nodes.add(key)
            log.error("unreadable znode %s (%s): %s", path, exc, treatment)

    # ------------------------------------------------------------ actions
    def _act(self, action: hc.Action) -> bool:
        """Carry out one action; False when a claim was lost."""
        g = self.config.group
        if isinstance(action, hc.Claim):
            return self._claim(action)
        if isinstance(action, hc.Follow):
            self.post(Follow(action.epoch, action.cut))
        elif isinstance(action, hc.Halt):
            self.post(Halt())
        elif isinstance(action, hc.StepDown):
            log.error("stepping down as master of %s: %s", g, action.why)
            self._term = None
            self.post(Lease(0.0))
            self.post(Demote(action.why))
            self.registry.remove_routes()
        elif isinstance(action, hc.Drain):
            self.post(Drain(action.on))
        elif isinstance(action, hc.ReleaseMaster):
            self._release_master()
        elif isinstance(action, hc.PublishIsr):
            self._write_isr(action.members)
            log.info("in-sync set of %s is now %s", g, sorted(action.members))
        elif isinstance(action, hc.PublishRoutes):
            self.registry.publish_routes(action.epoch)
        elif isinstance(action, hc.RefreshInfo):
            self.registry.update_info()
        return True

    def _claim(self, claim: hc.Claim) -> bool:
        cfg, p, g = self.config, self.paths, self.config.group
        t0 = time.monotonic()
        node = MasterNode(cfg.broker_id, claim.epoch, cfg.address, cfg.ha_address).to_bytes()
        tx = self.zk.transaction()
        if claim.replaces is not None:          # an expired master's node, as last seen
            tx.delete(p.master(g), version=claim.replaces)
        tx.create(p.epoch(g, claim.epoch),
                  EpochNode(claim.epoch, cfg.broker_id, claim.start_offset).to_bytes())
        tx.create(p.master(g), node, ephemeral=True)
        results = tx.commit()
        if any(isinstance(r, Exception) for r in results):
            log.info("claim of epoch %d lost: %s", claim.epoch, results)
            return False
        self._term = (claim.epoch, node, 0)
        self._write_isr(frozenset({cfg.broker_id}), claim.epoch)
        if claim.lagging:
            log.warning("promoted OUT OF SYNC at offset %d (allow_lagging_promotion): messages "
                        "the old master held past it are lost", claim.start_offset)
        log.info("became master of %s at epoch %d, start offset %d", g, claim.epoch,
                 claim.start_offset)
        if claim.gone is not None:
            self._forget_member(claim.gone, claim.epoch)
        # the term's first lease comes with the order: the serving thread
        # keeps a lease only in a master's parts
        self.post(Promote(claim.epoch, self.isr_published,
                          t0 + master_ack_lease_s(self.lease_s)))
        try:
            self.zk.delete(p.switchover(g))
        except NoNodeError:
            pass
        return True

    def _forget_member(self, broker_id: int, epoch: int) -> None:
        """The replaced master's member node outlives it until its session
        ends (``zk_session_timeout_ms``), still saying MASTER: clients and
        status would take it for the master. It goes now, if it still says
        so (a broker that came back registers anew, as a slave; one that is
        alive after all writes its node again, ``BrokerRegistry.update_info``)."""
        path = self.paths.member(self.config.group, broker_id)
        try:
            raw, stat = self.zk.get(path)
            node = MemberNode.from_bytes(raw, broker_id)
            if node.role == Role.MASTER and node.epoch < epoch:
                self.zk.delete(path, version=stat.version)
                log.info("removed the member node of broker %d, the master it replaced",
                         broker_id)
        except (NoNodeError, BadVersionError, NodeError):
            pass

    def _release_master(self) -> None:
        """A drained master (already serving as slave, marked stepping down)
        gives up the master node to the slave the election picks."""
        p, g = self.paths, self.config.group
        self._term = None
        self.post(Lease(0.0))
        self.registry.remove_routes()
        self.registry.update_info()
        try:
            self.zk.delete(p.master(g))
        except NoNodeError:
            pass
        log.info("handed over the master of %s", g)

    def _write_isr(self, members: frozenset[int], epoch: int | None = None) -> None:
        p, g = self.paths, self.config.group
        data = IsrNode(self.memory.epoch if epoch is None else epoch, self.config.broker_id,
                       members).to_bytes()
        self.post(IsrWriting(members))   # ZooKeeper may list it from now on
        try:
            self.zk.set(p.isr(g), data)
        except NoNodeError:
            try:
                self.zk.create(p.isr(g), data)
            except NodeExistsError:
                self.zk.set(p.isr(g), data)
        self._fault_hold_isr_answer()
        self.isr_published = members
        self.post(IsrPublished(members))

    def _fault_hold_isr_answer(self) -> None:
        """Fault injection for tests (``DUOMQ_FAULT_HOLD_ISR_ANSWER``, a file's
        path): while that file exists, an in-sync-set write ZooKeeper applied
        is not taken as done, as if its answer had been lost."""
        path = os.environ.get("DUOMQ_FAULT_HOLD_ISR_ANSWER")
        if not path or not os.path.exists(path):
            return
        log.warning("fault injection: the answer of an in-sync set write is held while %s "
                    "exists", path)
        while os.path.exists(path) and not self._stopped.wait(0.05):
            pass
