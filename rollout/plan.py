"""What a rollout does to one broker group, worked out from what was
observed (no I/O here). A group is a StatefulSet with ``updateStrategy:
OnDelete``: a pod runs its new template only once deleted. The order is
role-aware: slaves first (each back and in sync before the next), then one
hand-over of the master to an updated slave, then the old master, which
comes back as a slave. So a group sees exactly one hand-over per rollout
(none when only slaves were behind), and a newer record format reaches the
slaves before any master writes it."""

from __future__ import annotations

from dataclasses import dataclass

from duomq.common.role import Role


@dataclass(frozen=True)
class Pod:
    name: str
    uid: str
    revision: str                  # its controller-revision-hash
    ready: bool
    terminating: bool
    image: str
    role: str | None = None        # as the broker answers `duomq health --ready`
    epoch: int | None = None


@dataclass(frozen=True)
class Group:
    name: str                      # the StatefulSet's
    update_revision: str
    replicas: int
    strategy: str                  # updateStrategy.type
    pods: tuple[Pod, ...]

    @property
    def outdated(self) -> list[Pod]:
        return [p for p in self.pods if p.revision != self.update_revision]

    @property
    def master(self) -> Pod | None:
        masters = [p for p in self.pods if p.role == Role.MASTER]
        return masters[0] if len(masters) == 1 else None


@dataclass(frozen=True)
class Step:
    kind: str                      # RESTART_SLAVE, HAND_OVER, RESTART_OLD_MASTER
    pod: str

    def describe(self) -> str:
        return {RESTART_SLAVE: f"restart slave {self.pod} on the new revision; wait until it "
                               f"is back and in sync",
                HAND_OVER: f"hand the master {self.pod} over to an updated in-sync slave",
                RESTART_OLD_MASTER: f"restart {self.pod} (a slave now) on the new revision; "
                                    f"wait until it is back and in sync"}[self.kind]


RESTART_SLAVE, HAND_OVER, RESTART_OLD_MASTER = "restart-slave", "hand-over", "restart-old-master"


class Unhealthy(Exception):
    """The group is not fit to be rolled, or stopped being so: the rollout
    stops without touching it further."""


def check(group: Group) -> None:
    """Raises Unhealthy unless every replica is there, not going away,
    exactly one is the master, and every pod is ready but an outdated
    non-master (a broken pod of an earlier rollout, which restarting on the
    new revision mends)."""
    if group.strategy != "OnDelete":
        raise Unhealthy(f"{group.name}: updateStrategy is {group.strategy}, not OnDelete: the "
                        f"StatefulSet controller would roll it by ordinal on its own (apply "
                        f"the manifests of this version first)")
    if len(group.pods) != group.replicas:
        raise Unhealthy(f"{group.name}: {len(group.pods)} of {group.replicas} pods exist")
    for p in group.pods:
        if p.terminating:
            raise Unhealthy(f"{group.name}: pod {p.name} is terminating")
        mendable = p.revision != group.update_revision and p.role != Role.MASTER
        if not p.ready and not mendable:
            raise Unhealthy(f"{group.name}: pod {p.name} is not ready"
                            + (" (a slave not in sync)" if p.role == Role.SLAVE else ""))
        if p.ready and p.role not in (Role.MASTER, Role.SLAVE):
            raise Unhealthy(f"{group.name}: pod {p.name} did not say its role")
    if group.master is None:
        masters = [p.name for p in group.pods if p.role == Role.MASTER]
        raise Unhealthy(f"{group.name}: {len(masters)} masters ({', '.join(masters) or 'none'})")


def plan(group: Group) -> list[Step]:
    """The steps that bring every pod of a healthy group to its update
    revision: outdated slaves by name, then (if the master is outdated) the
    hand-over and the old master. Empty when the group is up to date."""
    master = group.master
    assert master is not None, "plan() on a group check() refused"
    # the broken ones first: the group is whole again sooner
    steps = [Step(RESTART_SLAVE, p.name)
             for p in sorted(group.outdated, key=lambda p: (p.ready, p.name))
             if p.name != master.name]
    if master.revision != group.update_revision:
        if group.replicas < 2:
            raise Unhealthy(f"{group.name}: a group of one broker cannot hand over: its "
                            f"restart stops its writes")
        steps += [Step(HAND_OVER, master.name), Step(RESTART_OLD_MASTER, master.name)]
    return steps
