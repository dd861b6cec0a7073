"""Drill scenarios: per round, a fault on a broker of the drilled group,
then its heal. Each says what the group must have to host it; the runner
waits for recovery between fault and heal and for health after the heal.
``random`` picks one of the others each round (seeded)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import ConnectionLoss, NoNodeError, SessionExpiredError

from duomq.coordinator import zk as zkutil
from duomq.coordinator.nodes import IsrNode, MasterNode
from duomq.coordinator.paths import ZkPaths
from duomq.drill.faults import Broker, DrillError


@dataclass(frozen=True)
class GroupView:
    group: str
    master: int | None
    epoch: int
    brokers: tuple[Broker, ...]
    isr: frozenset[int]
    replication: str
    flushes: frozenset[str] = frozenset()       # the members' flush modes

    def broker(self, broker_id: int) -> Broker:
        return next(b for b in self.brokers if b.broker_id == broker_id)

    def slaves(self) -> list[Broker]:
        return [b for b in self.brokers if b.broker_id != self.master]

    @property
    def healthy(self) -> bool:
        """A master, every member following it, every member in sync (SYNC)."""
        if self.master is None:
            return False
        ids = {b.broker_id for b in self.brokers}
        return self.replication != "SYNC" or ids <= self.isr

    def whole(self, expected: frozenset[int]) -> bool:
        """Healthy with every broker of ``expected`` registered: a broker
        whose member node is missing a moment (its successor removed it,
        taking it for dead) is not in sync just because it is not listed."""
        return self.healthy and expected <= {b.broker_id for b in self.brokers}


def view(zk, cluster: str, group: str, patience_s: float = 60.0) -> GroupView:
    """The group as ZooKeeper holds it. While the drill's own connection is
    down (a ZooKeeper server killed, the ensemble electing), it waits for
    kazoo to reconnect, up to ``patience_s``."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            return _read_view(zk, cluster, group)
        except (ConnectionLoss, SessionExpiredError):
            if time.monotonic() >= deadline:
                raise DrillError(f"the drill lost ZooKeeper for {patience_s:g} s") from None
            time.sleep(0.1)


def _read_view(zk, cluster: str, group: str) -> GroupView:
    paths = ZkPaths(cluster)
    try:
        master = MasterNode.from_bytes(zk.get(paths.master(group))[0])
        master_id, epoch = master.broker_id, master.epoch
    except (NoNodeError, ValueError):
        master_id, epoch = None, 0
    try:
        isr = IsrNode.from_bytes(zk.get(paths.isr(group))[0]).members
    except (NoNodeError, ValueError):
        isr = frozenset()
    brokers, replication, flushes = [], "", set()
    for m in zkutil.read_members(zk, paths, group).values():
        replication = replication or m.replication
        flushes.add(m.flush)
        brokers.append(Broker(group, m.broker_id, m.role, m.pid or None, m.address,
                              m.ha_address))
    return GroupView(group, master_id, epoch, tuple(brokers), isr, replication,
                     frozenset(flushes))


@dataclass(frozen=True)
class Scenario:
    name: str
    what: str
    needs: Callable[[GroupView], str | None]    # why the group cannot host it, or None
    target: Callable[[GroupView], Broker]
    fault: Callable[[Any, Broker], str]         # (driver, target) -> what was done
    heal: Callable[[Any, Broker], str]
    hold_s: float = 0.0                         # keep the fault at least this long
    elects: bool = True       # the group elects a new master before the heal
    refuses: bool = False     # the fault shows as refused writes: hold_s counts from the first
    # what the fault driver must be able to do to the group, or None
    driver_needs: Callable[[Any, GroupView], None] | None = None
    duration_s: float | None = None   # held for --duration (this by default) instead of hold_s
    consumers: bool = False   # the fault is on the drill's share readers (--consumer share):
                              # fault and heal get them in place of the driver


def _needs_slave(g: GroupView) -> str | None:
    if g.master is None:
        return f"group {g.group} has no master"
    if not g.slaves():
        return f"group {g.group} has no slave: a master fault would stop it for good"
    return None


def _needs_master(g: GroupView) -> str | None:
    return None if g.master is not None else f"group {g.group} has no master"


def _master(g: GroupView) -> Broker:
    return g.broker(g.master)   # type: ignore[arg-type]


def _a_slave(g: GroupView) -> Broker:
    return g.slaves()[0]


SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario("kill-master", "kill -9 the master; start it again once writes are back",
             _needs_slave, _master, lambda d, b: d.kill(b), lambda d, b: d.start(b)),
    Scenario("kill-slave", "kill -9 a slave; start it again",
             _needs_slave, _a_slave, lambda d, b: d.kill(b), lambda d, b: d.start(b),
             hold_s=5.0, elects=False),
    Scenario("pause-master", "SIGSTOP the master past its session; SIGCONT it",
             _needs_slave, _master, lambda d, b: d.pause(b), lambda d, b: d.resume(b)),
    Scenario("partition-master-zookeeper", "cut the master off ZooKeeper; reconnect it",
             _needs_slave, _master, lambda d, b: d.isolate_from_zookeeper(b),
             lambda d, b: d.heal_network()),
    Scenario("kill-zookeeper", "kill -9 the ZooKeeper ensemble's leader; start it again",
             _needs_master, _master, lambda d, b: d.kill_zookeeper(),
             lambda d, b: d.start_zookeeper(),
             hold_s=5.0, elects=False),
    Scenario("partition-master-slave", "cut the replication port of the master; reconnect it",
             _needs_slave, _master,
             lambda d, b: d.cut_port(b, b.ha_port, f"{b.name}'s replication"),
             lambda d, b: d.heal_network(), hold_s=5.0, elects=False),
    Scenario("reset-replication", "reset the master's replication connections (TCP RST) "
                                  "every 0.5 s, each re-dial mid-send; stop",
             _needs_slave, _master,
             lambda d, b: d.reset_connections(b, b.ha_port, f"{b.name}'s replication"),
             lambda d, b: d.stop_resets(), hold_s=3.0, elects=False),
    Scenario("partition-clients-master", "cut the master's client port; reconnect it",
             _needs_slave, _master, lambda d, b: d.cut_port(b, b.port, f"{b.name}'s clients"),
             lambda d, b: d.heal_network(), hold_s=5.0, elects=False),
    Scenario("zookeeper-outage", "pause every ZooKeeper server for --duration (10 s); resume "
                                 "them", _needs_master, _master,
             lambda d, b: d.pause_zookeeper(), lambda d, b: d.resume_zookeeper(),
             elects=False, duration_s=10.0,
             driver_needs=lambda d, g: d.zookeeper_pausable()),
    Scenario("zookeeper-session-expiry", "cut the master off ZooKeeper past its session "
                                         "(--duration, 17 s); reconnect it",
             _needs_slave, _master, lambda d, b: d.isolate_from_zookeeper(b),
             lambda d, b: d.heal_network(), duration_s=17.0),
    Scenario("disk-full-master", "fill the master's store volume until it refuses writes; "
                                 "free it", _needs_master, _master, lambda d, b: d.fill_disk(b),
             lambda d, b: d.free_disk(), hold_s=5.0, elects=False, refuses=True,
             driver_needs=lambda d, g: d.store_volume(_master(g))),
    Scenario("kill-consumer", "kill -9 the share-group reader holding the most messages; "
                              "start another (--consumer share)", _needs_master, _master,
             lambda r, b: r.kill_one(), lambda r, b: r.start_one(), hold_s=1.0, elects=False,
             consumers=True),
)}
NAMES = [*SCENARIOS, "random"]
# random mixes faults of the broker group and ZooKeeper outages that need
# nothing else (no ZooKeeper ensemble, no store volume), on a random
# schedule: the hold of each fault and the gap before the next are drawn too
RANDOM = sorted(n for n in SCENARIOS
                if n not in ("kill-zookeeper", "disk-full-master", "kill-consumer"))


def pick(name: str, rnd: random.Random, among: list[str] | None = None) -> Scenario:
    """The scenario ``name``; for ``random``, one drawn from ``among`` (the
    random ones this cluster and driver can host; default: all of them)."""
    if name == "random":    # faults of the broker group (a ZooKeeper ensemble is not assumed)
        return SCENARIOS[rnd.choice(among or RANDOM)]
    try:
        return SCENARIOS[name]
    except KeyError:
        raise DrillError(f"unknown scenario {name!r}: one of {', '.join(NAMES)}") from None
