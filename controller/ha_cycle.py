"""One HA cycle as a pure function (Patroni's ``run_cycle``): what this
broker does about its role, decided from one frozen view of its group read
once per cycle, with the sentence the controller logs.

    run_cycle(view, memory, now, settle_s) -> Cycle(actions, sentence, memory, wake_in_s)

``view`` is what ZooKeeper held when the cycle began plus what the serving
thread last reported; ``memory`` is what the controller remembers between
cycles (the role it last ordered, the epoch it follows, ...). The actions are
carried out by ``ha_controller.HaController`` in order: ZooKeeper writes on
its own thread, role changes posted to the serving thread. Testable without a
server: tests/coordinator/test_ha_cycle.py builds views by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from duomq.common.role import Role
from duomq.controller.election import Member, Snapshot, choose_master, truncation_point
from duomq.coordinator.nodes import EpochNode, IsrNode, MasterNode, MemberNode, SwitchoverNode

CONNECTED, SUSPENDED, LOST = "CONNECTED", "SUSPENDED", "LOST"


# ------------------------------------------------------------ the view
@dataclass(frozen=True)
class GroupView:
    """One read of the group's nodes (``session`` CONNECTED), or only the
    session state when ZooKeeper cannot be read."""
    me: int
    session: str = CONNECTED
    master: MasterNode | None = None
    # the master node went unrenewed for a whole lease (master_lease): its
    # holder is presumed gone, and a claim replaces the node at this version
    master_expired: bool = False
    master_version: int | None = None
    members: tuple[MemberNode, ...] = ()
    silent: frozenset[int] = frozenset()         # members whose nodes went unrefreshed a lease
    isr: IsrNode | None = None
    epochs: tuple[EpochNode, ...] = ()           # the group's history, oldest first
    switchover: SwitchoverNode | None = None
    # this broker, as its own files and its serving thread say
    local_epoch: int = 0
    local_max_offset: int = 0
    allow_lagging_promotion: bool = False
    serving_role: Role = Role.SLAVE                   # the role the serving thread has taken
    serving_epoch: int = 0
    serving_following: bool = False              # the serving thread's replication link runs
    isr_wanted: frozenset[int] | None = None     # the slaves the master's links find in sync
    draining: bool = False                       # the master refuses writes to hand over
    drained: bool = False                        # a draining master is ready to hand over


# ------------------------------------------------------------ actions
@dataclass(frozen=True)
class Claim:
    """Create epoch ``epoch`` (starting at ``start_offset``) and the master
    node in one transaction; ``replaces``: first delete the expired master
    node at this version (a renewal since then fails the claim)."""
    epoch: int
    start_offset: int
    lagging: bool = False
    replaces: int | None = None
    gone: int | None = None       # the expired master, whose member node goes after the claim


@dataclass(frozen=True)
class Follow:
    """Serving thread: cut the log to ``cut`` if it holds more (the first
    later epoch's start; ``NO_CUT``: none later), then follow the master of
    ``epoch``. The log's end is read when the cut is made, not here."""
    epoch: int
    cut: int


NO_CUT = 1 << 62     # a Follow whose history has no later epoch: nothing is cut
HALT_WAIT_S = 0.02   # a cycle again this soon after Halt (the serving thread publishes at once)


@dataclass(frozen=True)
class Halt:
    """Serving thread: stop replicating before this broker claims, so that
    its log end (the new epoch's start) no longer moves."""


@dataclass(frozen=True)
class StepDown:
    """Serving thread: stop acking writes at once. ZooKeeper: drop the routes."""
    why: str


@dataclass(frozen=True)
class Drain:
    """Serving thread: refuse new writes until a slave holds everything (planned
    switchover); ``on`` False: the switchover was withdrawn, take writes again."""
    on: bool = True


@dataclass(frozen=True)
class ReleaseMaster:
    """A drained master: mark itself stepping down, then delete the master node."""


@dataclass(frozen=True)
class PublishIsr:
    members: frozenset[int]


@dataclass(frozen=True)
class PublishRoutes:
    """The serving thread took the master's role at ``epoch``: publish the topic routes."""
    epoch: int


@dataclass(frozen=True)
class RefreshInfo:
    """Write this broker's member node now (fresh offsets before an election)."""


Action = Claim | Follow | Halt | StepDown | Drain | ReleaseMaster | PublishIsr | PublishRoutes | \
    RefreshInfo


# ------------------------------------------------------------ memory and result
@dataclass(frozen=True)
class Memory:
    """What the controller remembers between cycles."""
    role: Role = Role.SLAVE                # the role last ordered
    epoch: int = -1                   # the epoch led (master) or followed (slave); -1 none
    vacant_since: float | None = None  # when this broker first saw the group without a master
    isr_published: frozenset[int] = frozenset()
    routes_epoch: int = -1            # routes published as master of this epoch


@dataclass(frozen=True)
class Cycle:
    actions: tuple[Action, ...]
    sentence: str
    memory: Memory
    wake_in_s: float | None = None    # run the next cycle this soon (None: when woken or the period)


def _history(view: GroupView) -> list[tuple[int, int]]:
    return sorted((e.epoch, e.start_offset) for e in view.epochs)


def _snapshot(view: GroupView, gone: int | None = None) -> Snapshot:
    """The election's input; ``gone``: a master presumed dead (its lease
    expired), whose member node may outlive it until its session ends."""
    members = tuple(Member(m.broker_id, m.max_offset, m.epoch, m.stepping_down, m.promotable,
                           m.broker_id in view.silent and m.broker_id != view.me,
                           0 < m.master_max_offset <= m.max_offset)
                    for m in view.members if m.broker_id != gone)
    preferred = view.switchover.target if view.switchover else None
    holder = view.master.broker_id if view.master and not view.master_expired else None
    return Snapshot(members, view.isr.members if view.isr is not None else None,
                    holder, view.allow_lagging_promotion, preferred)


# ------------------------------------------------------------ the cycle
def run_cycle(view: GroupView, memory: Memory, now: float, settle_s: float) -> Cycle:
    """Decide this cycle's actions (see the module docstring)."""
    if view.session != CONNECTED:
        return _disconnected(view, memory)
    if memory.role == Role.MASTER:
        return _as_master(view, memory)
    return _as_slave(view, memory, now, settle_s)


def _disconnected(view: GroupView, memory: Memory) -> Cycle:
    if view.session == LOST and memory.role == Role.MASTER:
        why = "ZooKeeper session lost"
        return Cycle((StepDown(why),), f"{why}: stepping down",
                     replace(memory, role=Role.SLAVE, epoch=-1, routes_epoch=-1))
    if memory.role == Role.MASTER:
        return Cycle((), "ZooKeeper connection suspended: acking only what every in-sync "
                         "slave holds until the lease is renewed", memory)
    return Cycle((), f"ZooKeeper session {view.session.lower()}: waiting to reconnect", memory)


def _as_master(view: GroupView, memory: Memory) -> Cycle:
    me = view.me
    holder = view.master.broker_id if view.master else None
    if holder != me or (view.master is not None and view.master.epoch != memory.epoch):
        why = "the master node is gone" if holder is None else f"broker {holder} holds the master node"
        return Cycle((StepDown(why),), f"lost the master node ({why}): stepping down",
                     replace(memory, role=Role.SLAVE, epoch=-1, routes_epoch=-1))
    if view.drained:
        return Cycle((ReleaseMaster(),), f"handed over the master of epoch {memory.epoch}: "
                                         f"releasing the master node",
                     replace(memory, role=Role.SLAVE, epoch=-1, routes_epoch=-1, vacant_since=None))
    actions: list[Action] = []
    if (memory.routes_epoch != memory.epoch and view.serving_role == Role.MASTER
            and view.serving_epoch == memory.epoch):
        actions.append(PublishRoutes(memory.epoch))
        memory = replace(memory, routes_epoch=memory.epoch)
    if view.isr_wanted is not None:
        isr = frozenset(view.isr_wanted | {me})
        if isr != memory.isr_published:
            actions.append(PublishIsr(isr))
            memory = replace(memory, isr_published=isr)
    sw = view.switchover
    if sw is not None and sw.source in (None, me):
        actions.append(Drain())
        target = "the best in-sync slave" if sw.target is None else f"broker {sw.target}"
        return Cycle(tuple(actions), f"draining writes for a planned switchover to {target}",
                     memory)
    if view.draining:
        actions.append(Drain(on=False))
        return Cycle(tuple(actions), "the planned switchover was withdrawn: taking writes again",
                     memory)
    return Cycle(tuple(actions), f"master of epoch {memory.epoch}, in-sync set "
                                 f"{sorted(memory.isr_published)}", memory)


def _as_slave(view: GroupView, memory: Memory, now: float, settle_s: float) -> Cycle:
    me, master = view.me, view.master
    if master is not None and view.master_expired:
        return _vacant(view, memory, now, settle_s)
    if master is not None and not master.known:
        return Cycle((), "the master node cannot be read: waiting for its holder to rewrite "
                         "it or for its session to end", replace(memory, vacant_since=None))
    if master is not None and master.broker_id != me:
        memory = replace(memory, vacant_since=None)
        if master.epoch == memory.epoch:
            return Cycle((), f"following broker {master.broker_id} at epoch {master.epoch}",
                         memory)
        cut = truncation_point(view.local_epoch, NO_CUT, _history(view))
        where = "nothing to cut" if cut == NO_CUT else f"log cut at {cut} if it holds more"
        return Cycle((Follow(master.epoch, cut),),
                     f"following broker {master.broker_id} at epoch {master.epoch} (local "
                     f"epoch {view.local_epoch}, {where})",
                     replace(memory, epoch=master.epoch))
    if master is not None:   # our own node, left by a session or a role we no longer hold
        return Cycle((), f"the master node of epoch {master.epoch} names this broker, which "
                         f"is not master: waiting for its lease to expire", memory)
    return _vacant(view, memory, now, settle_s)


def _vacant(view: GroupView, memory: Memory, now: float, settle_s: float) -> Cycle:
    """No master: the node is gone, or its holder stopped renewing it."""
    me, master = view.me, view.master
    expired = master is not None and view.master_expired
    gone = "no master" if not expired or master is None else \
        f"broker {master.broker_id} (epoch {master.epoch}) stopped renewing its lease"
    if memory.vacant_since is None:
        return Cycle((RefreshInfo(),), f"{gone}: waiting {settle_s * 1000:.0f} ms for the "
                                       f"members' offsets to settle",
                     replace(memory, vacant_since=now, epoch=-1), wake_in_s=settle_s)
    left = memory.vacant_since + settle_s - now
    if left > 0:
        return Cycle((), f"{gone}: waiting {settle_s * 1000:.0f} ms for the members' offsets "
                         f"to settle", memory, wake_in_s=left)
    holder = master.broker_id if expired and master is not None else None
    decision = choose_master(_snapshot(view, gone=holder if holder != me else None))
    if decision.candidate != me:
        return Cycle((), f"election: {decision.reason}", memory)
    if view.serving_following:     # the log must stop growing before its end is claimed
        return Cycle((Halt(),), f"election: {decision.reason}; stopping replication before "
                                f"claiming", memory, wake_in_s=HALT_WAIT_S)
    history = _history(view)
    epoch = (history[-1][0] if history else 0) + 1
    return Cycle((Claim(epoch, view.local_max_offset, decision.lagging,
                        view.master_version if expired else None,
                        holder if holder != me else None),),
                 f"election: {decision.reason}; claiming epoch {epoch}",
                 replace(memory, role=Role.MASTER, epoch=epoch, vacant_since=None,
                         isr_published=frozenset({me}), routes_epoch=-1))
