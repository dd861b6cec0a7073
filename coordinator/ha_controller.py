"""The HA controller: decides and enacts this broker's role in its group.

A thread per broker. It watches the master node, the members and its own
ZooKeeper session, runs ``election.choose_master`` on a fresh snapshot every
cycle (logging the reason whenever it changes), claims the master in one
transaction (a new epoch and its start offset, the master node, the ISR), and
hands role changes to the serving thread through ``post(kind, a, b)``:

  ``P`` epoch        become master at this epoch
  ``F`` epoch, cut   follow the master of this epoch, after truncating to ``cut``
  ``D``              stop being master now (fenced: session lost, or a handover)

Fencing: a master acks writes only while it holds a lease, renewed by a
successful ZooKeeper round trip and lasting half the session timeout, so it
stops acking before its session can expire and a successor be elected (a
SIGSTOPped master wakes with an expired lease). It steps down when the session
is lost.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from kazoo.client import KazooState
from kazoo.exceptions import NodeExistsError, NoNodeError, ZookeeperError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from duomq.coordinator.election import Member, Snapshot, choose_master, truncation_point
from duomq.coordinator.paths import ZkPaths
from duomq.coordinator.zk import dumps, loads

log = logging.getLogger(__name__)
MASTER, SLAVE = "MASTER", "SLAVE"


class HaController:
    CYCLE_S = 1.0

    def __init__(self, zk, config, registry, max_offset: Callable[[], int],
                 local_epoch: Callable[[], int], post: Callable[[bytes, int, int], None]):
        self.zk = zk
        self.config = config
        self.registry = registry
        self.paths = ZkPaths(config.cluster)
        self.max_offset = max_offset
        self.local_epoch = local_epoch
        self.post = post
        self.role = SLAVE                 # what we last told the serving thread
        self.following_epoch = -1
        self.lease_until = 0.0            # monotonic; a master acks only before it
        self.isr_wanted: set[int] | None = None
        self.isr_published: set[int] = set()
        self.switchover: dict | None = None
        self.last_reason = ""
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ha-controller", daemon=True)
        self._lease_thread = threading.Thread(target=self._lease_loop, name="zk-lease",
                                              daemon=True)

    # ------------------------------------------------------------ lifecycle
    def start(self) -> None:
        g = self.config.group
        self.zk.add_listener(self._on_state)
        DataWatch(self.zk, self.paths.master(g), lambda d, s: self._wakeup())
        ChildrenWatch(self.zk, self.paths.members(g), lambda c: self._wakeup())
        DataWatch(self.zk, self.paths.switchover(g), self._on_switchover)
        self._thread.start()
        self._lease_thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._wake.set()
        self._thread.join(5)

    def _wakeup(self, *_):
        if self._stopped.is_set():
            return False
        self._wake.set()
        return True

    def lease_valid(self) -> bool:
        return time.monotonic() < self.lease_until

    def request_isr(self, members: set[int]) -> None:
        """The serving thread's wish; published by the controller thread."""
        if members != self.isr_wanted:
            self.isr_wanted = set(members)
            self._wake.set()

    # ------------------------------------------------------------ threads
    def _run(self) -> None:
        while not self._stopped.is_set():
            self._wake.wait(self.CYCLE_S)
            self._wake.clear()
            if self._stopped.is_set():
                return
            try:
                self.cycle()
            except ZookeeperError as exc:
                log.warning("HA cycle: ZooKeeper error %s", exc)
            except Exception:
                log.exception("HA cycle failed")

    def _lease_loop(self) -> None:
        period = self.config.zk_session_timeout_ms / 4000
        while not self._stopped.wait(period):
            t0 = time.monotonic()
            try:
                self.zk.exists_async(self.paths.master(self.config.group)).get(timeout=period)
                self.lease_until = t0 + self.config.zk_session_timeout_ms / 2000
            except Exception:
                pass   # the lease runs out by itself

    def _on_state(self, state):
        if state in (KazooState.SUSPENDED, KazooState.LOST):
            self.lease_until = 0.0            # stop acking at once
            if state == KazooState.LOST and self.role == MASTER:
                log.error("ZooKeeper session lost: stepping down")
                self._set_role(SLAVE)
                self.post(b"D", 0, 0)
        self._wake.set()

    def _on_switchover(self, data, stat):
        if self._stopped.is_set():
            return False
        self.switchover = loads(data) if data else None
        self._wake.set()
        return True

    # ------------------------------------------------------------ the cycle
    def _set_role(self, role: str) -> None:
        self.role = role
        self.registry.role = role

    def snapshot(self) -> tuple[Snapshot, dict | None, list[tuple[int, int]]]:
        g, p = self.config.group, self.paths
        try:
            master = loads(self.zk.get(p.master(g))[0])
        except NoNodeError:
            master = None
        members = []
        for child in self.zk.get_children(p.members(g)):
            try:
                info = loads(self.zk.get(p.member(g, int(child)))[0])
            except (NoNodeError, ValueError):
                continue
            members.append(Member(int(child), int(info.get("max_offset", 0)),
                                  int(info.get("epoch", 0)), bool(info.get("stepping_down")),
                                  bool(info.get("promotable", True))))
        try:
            isr_data = loads(self.zk.get(p.isr(g))[0])
            isr = frozenset(int(m) for m in isr_data.get("members", []))
        except NoNodeError:
            isr = None
        history = self.epoch_history()
        preferred = self.switchover.get("target") if self.switchover else None
        snap = Snapshot(tuple(members), isr, master.get("broker_id") if master else None,
                        self.config.allow_lagging_promotion, preferred)
        return snap, master, history

    def epoch_history(self) -> list[tuple[int, int]]:
        g, p = self.config.group, self.paths
        out = []
        for child in self.zk.get_children(p.epochs(g)):
            if child.isdigit():
                try:
                    data = loads(self.zk.get(p.epoch(g, int(child)))[0])
                except NoNodeError:
                    continue
                out.append((int(child), int(data.get("start_offset", 0))))
        return sorted(out)

    def cycle(self) -> None:
        if self.zk.state != KazooState.CONNECTED:
            return
        me = self.config.broker_id
        snap, master, history = self.snapshot()
        if self.role == MASTER:
            if snap.master_id != me:
                log.error("lost the master node (holder: %s): stepping down", snap.master_id)
                self._set_role(SLAVE)
                self.post(b"D", 0, 0)
                return
            self._publish_isr()
            self._maybe_hand_over()
            return
        if master is not None and snap.master_id != me:
            epoch = int(master.get("epoch", 0))
            if epoch != self.following_epoch:
                cut = truncation_point(self.local_epoch(), self.max_offset(), history)
                self.following_epoch = epoch
                log.info("following broker %d at epoch %d (local epoch %d, cut at %d)",
                         snap.master_id, epoch, self.local_epoch(), cut)
                self.post(b"F", epoch, cut)
            return
        if master is None:
            self.following_epoch = -1
            self.registry.update_info()                 # our offset, fresh for the others
            time.sleep(self.config.election_settle_ms / 1000)
            snap, master, history = self.snapshot()
            decision = choose_master(snap)
            if decision.reason != self.last_reason:
                log.info("election: %s", decision.reason)
                self.last_reason = decision.reason
            if decision.candidate == me:
                self.claim(history, decision.lagging)

    def claim(self, history, lagging: bool) -> bool:
        cfg, p, g = self.config, self.paths, self.config.group
        epoch = (history[-1][0] if history else 0) + 1
        start = self.max_offset()
        tx = self.zk.transaction()
        tx.create(p.epoch(g, epoch), dumps({"broker_id": cfg.broker_id, "start_offset": start}))
        tx.create(p.master(g), dumps({"broker_id": cfg.broker_id, "epoch": epoch,
                                      "address": cfg.address, "ha_address": cfg.ha_address}),
                  ephemeral=True)
        results = tx.commit()
        if any(isinstance(r, Exception) for r in results):
            log.info("claim of epoch %d lost: %s", epoch, results)
            return False
        self.registry.epoch = epoch
        self.lease_until = time.monotonic() + cfg.zk_session_timeout_ms / 2000
        self._write_isr({cfg.broker_id})
        if lagging:
            log.warning("promoted OUT OF SYNC at offset %d (allow_lagging_promotion): messages "
                        "the old master held past it are lost", start)
        log.info("became master of %s at epoch %d, start offset %d", g, epoch, start)
        self._set_role(MASTER)
        self.post(b"P", epoch, start)
        if self.switchover:
            try:
                self.zk.delete(p.switchover(g))
            except NoNodeError:
                pass
        return True

    # ------------------------------------------------------------ master duties
    def _write_isr(self, members: set[int]) -> None:
        p, g = self.paths, self.config.group
        data = dumps({"epoch": self.registry.epoch, "master": self.config.broker_id,
                      "members": sorted(members)})
        try:
            self.zk.set(p.isr(g), data)
        except NoNodeError:
            try:
                self.zk.create(p.isr(g), data)
            except NodeExistsError:
                self.zk.set(p.isr(g), data)
        self.isr_published = set(members)

    def _publish_isr(self) -> None:
        wanted = self.isr_wanted
        if wanted is not None and (wanted | {self.config.broker_id}) != self.isr_published:
            self._write_isr(wanted | {self.config.broker_id})
            log.info("in-sync set of %s is now %s", self.config.group, sorted(self.isr_published))

    def _maybe_hand_over(self) -> None:
        """Planned switchover: the serving thread drains (``H``); once an in-sync
        slave holds everything, give up the master node for it."""
        if not self.switchover or self.switchover.get("from") not in (None, self.config.broker_id):
            return
        self.post(b"H", 0, 0)

    def hand_over(self) -> None:
        """Called by the serving thread once drained: release the master node."""
        p, g = self.paths, self.config.group
        self.registry.stepping_down = True
        self.registry.update_info()
        self._set_role(SLAVE)
        self.following_epoch = -1
        self.lease_until = 0.0
        try:
            self.zk.delete(p.master(g))
        except NoNodeError:
            pass
        log.info("handed over the master of %s", g)
        self._wake.set()
