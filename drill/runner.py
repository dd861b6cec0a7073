"""Runs a drill: set the topic up, start the workload, then round after
round inject the scenario's fault, wait for writes to come back (or hold it
and heal first), heal, wait for the group to be whole again; stop, read
everything back and check."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kazoo.exceptions import NodeExistsError

from duomq.common.errors import TopicNotExistError
from duomq.common.names import DLQ_PREFIX
from duomq.coordinator import zk as zkutil
from duomq.coordinator.topics import TopicAdmin
from duomq.drill import scenarios as sc
from duomq.drill.checker import ACKED, Report, Round, Truncation, check, truncations_in
from duomq.drill.faults import DrillError, wait_until
from duomq.drill.load import FaultReader, Workload, read_back
from duomq.drill.share_checker import check_share
from duomq.drill.share_load import INVISIBLE_MS, ShareReaders

Progress = Callable[[dict], None]


@dataclass
class DrillSettings:
    scenario: str
    rounds: int = 3
    group: str = ""                  # the broker group to break; default: the first
    topic: str = "DrillTopic"
    queues: int = 4
    producers: int = 2
    consumers: int = 1
    consumer: str = "group"          # group: PushConsumers of a consumer group read along;
                                     # share: SimpleConsumer processes of a share group
    ordered: bool = False
    load: str = "plain"              # mixed: delayed and transactional producers beside
    warmup_s: float = 2.0
    recovery_timeout_s: float = 60.0
    settle_timeout_s: float = 60.0
    fault_timeout_s: float = 600.0   # the external driver: longest wait for somebody's fault
    gap_s: float = 2.0               # load between a round's health and the next fault
    duration_s: float | None = None  # how long an outage scenario holds its fault
    seed: int = 0
    producer_settings: dict = field(default_factory=dict)


@dataclass
class DrillRun:
    report: Report
    ops: list
    rounds: list
    timeline: list                   # (seconds since t0, event) for the plot
    t0: float = 0.0                  # monotonic start


def run(settings: DrillSettings, zookeeper: str, cluster: str, driver,
        progress: Progress = lambda _p: None) -> DrillRun:
    zk = zkutil.connect(zookeeper, cluster=cluster)
    try:
        return _run(settings, zookeeper, cluster, driver, zk, progress)
    finally:
        driver.close()
        zkutil.close(zk)


def _run(s: DrillSettings, zookeeper: str, cluster: str, driver, zk, progress) -> DrillRun:
    rnd = random.Random(s.seed)
    group = s.group or _first_group(zk, cluster)
    first = sc.view(zk, cluster, group)
    expected = frozenset(b.broker_id for b in first.brokers)
    usable = _usable(s, rnd, first, driver)
    if s.scenario == "kill-zookeeper" and getattr(driver, "zookeeper_servers", lambda: 3)() < 3:
        raise DrillError("scenario kill-zookeeper needs a ZooKeeper ensemble of 3 or more: "
                         "start the dev cluster with 'duomq dev up --zookeepers 3'")
    if s.consumer == "share" and s.consumers < 1:
        raise DrillError("--consumer share needs at least one reader (--consumers)")
    durable = _durable(zk, cluster, group)
    _ensure_topic(zk, cluster, s.topic, s.queues)
    load = Workload(zookeeper, cluster, s.topic, producers=s.producers,
                    consumers=s.consumers if s.consumer == "group" else 0,
                    ordered=s.ordered, mixed=s.load == "mixed", **s.producer_settings)
    readers = ShareReaders(zookeeper, cluster, s.topic, f"drill-share-{load.run_id}",
                           s.consumers, f"{load.run_id}-".encode()) \
        if s.consumer == "share" else None
    load.start()
    reader = FaultReader(zookeeper, cluster, s.topic, f"{load.run_id}-".encode())
    rounds: list[Round] = []
    timeline: list[tuple[float, str]] = []
    unreadable: set[bytes] = set()
    t0 = time.monotonic()

    def tell(phase: str, **extra) -> None:
        now = time.monotonic()
        progress({"phase": phase, "round": len(rounds), "rounds": s.rounds,
                  "elapsed_s": now - t0, "acks_per_s": load.acked_since(now - 1.0),
                  "attempted": len(load.ops), "last": load.last_status(), **extra})

    try:
        tell("warm-up")
        if not wait_until(lambda: load.acked_since(t0) > 0, 30):
            raise DrillError(f"no send was acked within 30 s of the start: is group {group} "
                             f"writable? (last answer: {load.last_status() or 'none'})")
        time.sleep(s.warmup_s)
        for i in range(s.rounds):
            g = wait_until(lambda: (v := sc.view(zk, cluster, group)).whole(expected) and v,
                           s.settle_timeout_s)
            if not g:
                raise DrillError(f"group {group} did not become whole again within "
                                 f"{s.settle_timeout_s:g} s (round {i})")
            under = _UnderFault(load, reader, unreadable, tell)
            if driver.name == "external":
                rounds.append(_observed_round(i, s, load, zk, cluster, group, g, t0, timeline,
                                              tell, under))
            else:
                scenario = sc.pick(s.scenario, rnd, usable)
                rounds.append(_injected_round(i, scenario,
                                              readers if scenario.consumers else driver, s,
                                              load, zk, cluster, group, g, t0, timeline, tell,
                                              _hold(scenario, s, rnd), under))
            tell("healed")
            wait_until(lambda: sc.view(zk, cluster, group).whole(expected), s.settle_timeout_s)
            # a random schedule: the next fault comes after a drawn gap
            time.sleep(rnd.uniform(0.2, 2 * s.gap_s) if s.scenario == "random" else s.gap_s)
        tell("stopping")
    except BaseException:
        if readers is not None:
            readers.stop()
        raise
    finally:
        load.stop()
        reader.close()
        driver.close()
    try:
        return _audit(s, zookeeper, cluster, zk, driver, group, expected, durable, load, readers,
                      rounds, timeline, t0, tell, unreadable)
    finally:
        if readers is not None:
            readers.stop()


def _audit(s: DrillSettings, zookeeper: str, cluster: str, zk, driver, group: str,
           expected: frozenset[int], durable: bool, load: Workload,
           readers: ShareReaders | None, rounds: list[Round], timeline: list, t0: float,
           tell, unreadable: set[bytes]) -> DrillRun:
    """Once the group is whole again: read every stored message back and
    check the run (and the share group's history, with ``--consumer share``)."""
    tell("audit")
    wait_until(lambda: sc.view(zk, cluster, group).whole(expected), s.settle_timeout_s)
    prefix = f"{load.run_id}-".encode()            # the topic may hold earlier runs
    ops = load.journal()
    due = max((op.due for op in ops if op.outcome in ACKED), default=0.0)
    if due > time.monotonic():                 # the last timers: read once they are due
        time.sleep(due - time.monotonic() + _UnderFault.DUE_MARGIN_S)
    ids: dict[str, bytes] = {}
    back = [(q, b) for q, b in read_back(zookeeper, cluster, s.topic, s.settle_timeout_s, ids)
            if b.startswith(prefix)]
    report = check(s.scenario, ops, back, rounds, durable=durable, ordered=s.ordered,
                   idempotent=s.producer_settings.get("idempotent", True),
                   cuts=_truncations(driver, zk, cluster, group), unreadable=unreadable,
                   read_ids=ids)
    if readers is not None:
        _check_share(report, readers, zookeeper, cluster, {b for _q, b in back}, prefix,
                     s.settle_timeout_s, tell)
    report.notes.update({"group": group, "durable": durable, "delivered_to_group": load.delivered,
                         "seed": s.seed,
                         "read_back": len(back), "driver": driver.name,
                         "fault_tag": getattr(driver, "tag", "")})
    return DrillRun(report, ops, rounds, timeline, t0)


def _usable(s: DrillSettings, rnd: random.Random, first: sc.GroupView, driver) -> list[str]:
    """The scenarios this cluster and driver can host: the one asked for
    (else DrillError saying why not), or those of the random schedule."""
    usable: list[str] = []
    for name in (sc.RANDOM if s.scenario == "random" else [s.scenario]):
        scenario = sc.pick(name, rnd)
        try:
            why = scenario.needs(first)
            if why:
                raise DrillError(f"scenario {name} cannot run on this cluster: {why}")
            if scenario.consumers and s.consumer != "share":
                raise DrillError(f"scenario {name} needs --consumer share")
            if scenario.driver_needs and driver.name != "external":
                scenario.driver_needs(driver, first)      # raises DrillError
        except DrillError:
            if s.scenario != "random":
                raise
            continue                   # random draws among the others
        usable.append(name)
    if not usable:
        raise DrillError("no scenario of the random schedule can run on this cluster")
    return usable


def _check_share(report, readers: ShareReaders, zookeeper: str, cluster: str,
                 stored: set[bytes], prefix: bytes, patience_s: float, tell) -> None:
    """Let the share readers finish every stored message (those a killed
    reader held come back after their invisible time), then judge the
    group's whole history: the report's ``share`` note, and its problems in
    the verdict."""
    tell("share-drain")
    dlq = DLQ_PREFIX + readers.group

    def dead() -> set[bytes]:
        try:
            return {b for _q, b in read_back(zookeeper, cluster, dlq) if b.startswith(prefix)}
        except TopicNotExistError:
            return set()

    drained = readers.wait_accounted(stored, dead, patience_s + 3 * INVISIBLE_MS / 1000)
    readers.stop()
    events = [e for e in readers.journal() if e.body.startswith(prefix)]
    figures, problems = check_share(events, stored, dead())
    figures.update(readers=len(readers.procs), readers_killed=readers.killed,
                   held_by_killed=readers.held_by_killed, drained=drained)
    report.notes["share"] = figures
    if problems:
        report.guarantees_held = False
        report.verdict = "; ".join(([] if report.verdict == "guarantees held"
                                    else [report.verdict]) + problems)


def _truncations(driver, zk, cluster: str, group: str) -> list[Truncation] | None:
    """What the group's brokers logged cutting from their logs (None: the
    driver cannot read their logs, as the external one)."""
    read = getattr(driver, "broker_logs", None)
    if read is None:
        return None
    brokers = list(sc.view(zk, cluster, group).brokers)
    return [cut for name, text in read(group, brokers)
            for cut in truncations_in(text, name, group)]


def _hold(scenario: sc.Scenario, s: DrillSettings, rnd: random.Random) -> float:
    """How long the round keeps its fault: ``--duration`` for an outage
    scenario (its own default otherwise), drawn up to that in a random
    schedule; the scenario's hold for the others."""
    if scenario.duration_s is None:
        return scenario.hold_s
    full = s.duration_s if s.duration_s is not None else scenario.duration_s
    return rnd.uniform(full / 3, full) if s.scenario == "random" else full


class _UnderFault:
    """A round's read while its fault is in place: every message acked
    before the read began, looked for by a new reader; what it does not
    find joins the run's ``unreadable`` (lost, to the checker)."""

    PATIENCE_S = 5.0        # a reader's route moving to the new master
    DUE_MARGIN_S = 2.0      # a timer due this long before the read must be there

    def __init__(self, load: Workload, reader: FaultReader, unreadable: set[bytes], tell):
        self.load, self.reader, self.unreadable, self.tell = load, reader, unreadable, tell

    def read(self) -> dict:
        self.tell("reading under the fault")
        t = time.monotonic()
        # a timer counts once it has been due a while (the lone master moves it)
        acked = {op.body for op in self.load.journal() if op.outcome in ACKED
                 and op.due <= t - self.DUE_MARGIN_S}
        missing = self.reader.unreadable(acked, self.PATIENCE_S)
        self.unreadable |= missing
        return {"read_under_fault": len(acked), "unreadable_under_fault": len(missing),
                "read_under_fault_s": round(time.monotonic() - t, 3)}


def _injected_round(i: int, scenario: sc.Scenario, driver, s: DrillSettings, load: Workload,
                    zk, cluster: str, group: str, g: sc.GroupView, t0: float, timeline: list,
                    tell, hold_s: float, under: _UnderFault) -> Round:
    """Inject the scenario's fault, wait for the election and writes, heal."""
    target = scenario.target(g)
    fault_at = time.monotonic()
    what = scenario.fault(driver, target)
    timeline.append((fault_at - t0, f"{scenario.name}: {what}"))
    tell("fault", fault=what)
    watch = _Recovery(load, zk, cluster, group, fault_at, g.epoch)
    if scenario.elects:
        # an election, then writes back at the new epoch: acked, or
        # stored where the new master cannot ack yet (a pair's lone one)
        wait_until(watch.writes_back, s.recovery_timeout_s)
        tell("recovered" if watch.acked_at else
             "stored" if watch.stored_at else "no recovery")
    hold_from, refused_at = fault_at, None
    if scenario.refuses:      # e.g. a full disk: writes go on until the master needs room
        refused_at = wait_until(lambda: load.first_refusal_after(fault_at), s.recovery_timeout_s)
        tell("refusing" if refused_at else "never refused")
        if refused_at:
            timeline.append((refused_at - t0, f"refused: {load.last_status()}"))
            hold_from = refused_at
    time.sleep(max(0.0, hold_from + hold_s - time.monotonic()))
    read = under.read()
    healed = scenario.heal(driver, target)
    healed_at = time.monotonic()
    timeline.append((healed_at - t0, f"heal: {healed}"))
    since = healed_at if scenario.refuses else fault_at
    acked_at = wait_until(lambda: watch.poll() and load.first_ack_after(since),
                          s.recovery_timeout_s)
    if watch.elected_at:
        timeline.append((watch.elected_at - t0, f"epoch {g.epoch} -> {watch.epoch}"))
    notes = {"scenario": scenario.name, "target": target.name, "held_s": round(hold_s, 3),
             "epoch_before": g.epoch, "epoch_after": watch.epoch,
             "elected_after_s": _after(watch.elected_at, fault_at),
             "stored_after_s": _after(watch.stored_at, fault_at), **read}
    if scenario.refuses:
        notes.update(refused_after_s=_after(refused_at, fault_at),
                     writes_back_after_heal_s=_after(acked_at, healed_at))
    return Round(i, f"{scenario.name}: {what}", fault_at, healed_at, acked_at, notes)


def _observed_round(i: int, s: DrillSettings, load: Workload, zk, cluster: str, group: str,
                    g: sc.GroupView, t0: float, timeline: list, tell,
                    under: _UnderFault) -> Round:
    """The external driver: wait for somebody to break the group (its master
    or a member gone, a new epoch), time it from the last ack before it was
    seen, and wait for writes and for the group to be whole again."""
    tell("waiting for a fault")
    changed = wait_until(lambda: (v := sc.view(zk, cluster, group)) != g and _broken(v, g) and v,
                         s.fault_timeout_s)
    if not changed:
        raise DrillError(f"no fault seen in group {group} within {s.fault_timeout_s:g} s "
                         f"(round {i}): break it yourself with the external driver")
    seen_at = time.monotonic()
    fault_at = load.last_ack_before(seen_at) or seen_at
    what = _describe(changed, g)
    timeline.append((fault_at - t0, f"observed: {what}"))
    tell("fault", fault=what)
    watch = _Recovery(load, zk, cluster, group, fault_at, g.epoch)
    wait_until(lambda: watch.poll() and (watch.acked_at or watch.stored_at),
               s.recovery_timeout_s)
    read = under.read()            # before the group is whole again, if it is not yet
    wait_until(lambda: watch.poll() and watch.acked_at, s.recovery_timeout_s)
    everyone = frozenset(b.broker_id for b in g.brokers)
    healed = wait_until(lambda: sc.view(zk, cluster, group).whole(everyone), s.settle_timeout_s)
    healed_at = time.monotonic() if healed else None
    if watch.elected_at:
        timeline.append((watch.elected_at - t0, f"epoch {g.epoch} -> {watch.epoch}"))
    return Round(i, f"observed: {what}", fault_at, healed_at, watch.acked_at, {
        "scenario": "external", "seen_after_s": round(seen_at - fault_at, 3),
        "epoch_before": g.epoch, "epoch_after": watch.epoch,
        "elected_after_s": _after(watch.elected_at, fault_at),
        "stored_after_s": _after(watch.stored_at, fault_at), **read})


def _broken(v: sc.GroupView, g: sc.GroupView) -> bool:
    live = {b.broker_id for b in v.brokers}
    return v.master != g.master or v.epoch != g.epoch or live != {b.broker_id for b in g.brokers}


def _describe(v: sc.GroupView, g: sc.GroupView) -> str:
    gone = sorted({b.broker_id for b in g.brokers}
                  - {b.broker_id for b in v.brokers})
    parts = [f"{g.group}/{b} gone" for b in gone]
    if v.master != g.master:
        parts.append(f"master {g.master} -> {v.master}")
    return ", ".join(parts) or f"epoch {g.epoch} -> {v.epoch}"


class _Recovery:
    """What happened since a fault: the election (the group's epoch moved),
    the first send after it stored at the new epoch, the first one acked."""

    def __init__(self, load: Workload, zk, cluster: str, group: str, fault_at: float,
                 epoch: int):
        self.load, self.zk, self.cluster, self.group = load, zk, cluster, group
        self.fault_at, self.epoch = fault_at, epoch
        self.elected_at: float | None = None
        self.stored_at: float | None = None
        self.acked_at: float | None = None

    def poll(self) -> bool:
        now = time.monotonic()
        if self.elected_at is None:
            epoch = sc.view(self.zk, self.cluster, self.group).epoch
            if epoch > self.epoch:
                self.epoch, self.elected_at = epoch, now
        if self.acked_at is None:
            self.acked_at = self.load.first_ack_after(self.fault_at)
        if self.stored_at is None and self.elected_at is not None:
            self.stored_at = self.load.first_stored_after(self.fault_at, self.epoch)
        return True

    def writes_back(self) -> bool:
        """The group elected a new master and it stores writes."""
        self.poll()
        return self.stored_at is not None


def _after(t: float | None, since: float) -> float | None:
    return round(t - since, 3) if t is not None else None


def _first_group(zk, cluster: str) -> str:
    from duomq.coordinator.paths import ZkPaths
    groups = sorted(zk.get_children(ZkPaths(cluster).brokers)) \
        if zk.exists(ZkPaths(cluster).brokers) else []
    if not groups:
        raise DrillError(f"cluster {cluster!r} has no broker group")
    return groups[0]


def _durable(zk, cluster: str, group: str) -> bool:
    """Does the group promise that no acked message is lost in a failover?"""
    g = sc.view(zk, cluster, group)
    return g.replication == "SYNC" and g.flushes == {"SYNC_FLUSH"}


def _ensure_topic(zk, cluster: str, topic: str, queues: int) -> None:
    from duomq.common.errors import ConfigError
    from duomq.coordinator.paths import ZkPaths
    try:
        TopicAdmin(zk, cluster).create(topic, queues)
    except (ConfigError, NodeExistsError):
        pass                                  # it exists: the drill appends to it
    paths = ZkPaths(cluster)
    if not wait_until(lambda: zk.get_children(paths.topic_routes(topic))
                      if zk.exists(paths.topic_routes(topic)) else None, 15):
        raise DrillError(f"no broker group published a route for {topic} within 15 s")
