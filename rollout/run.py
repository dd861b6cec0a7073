"""Carrying out ``plan``'s steps on a cluster through ``kube.Kubectl``, one
group at a time: every step waits until the group is whole again (the pod
back on the new revision, ready, in sync) before the next, and the rollout
stops at the first step that does not get there, saying where it left the
group. What it reports per group: the steps taken, the master's epoch
before and after (one hand-over per rolled master, none else) and how long
it took."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from duomq.common.role import Role
from duomq.rollout.kube import Kubectl, KubectlError
from duomq.rollout.plan import (
    HAND_OVER,
    RESTART_OLD_MASTER,
    RESTART_SLAVE,
    Group,
    Pod,
    Step,
    Unhealthy,
    check,
    plan,
)

CONTAINER = "broker"
HEALTH = ["duomq", "health", "--ready", "--json"]
STEP_DOWN = ["duomq", "failover", "--step-down", "--json"]
POLL_S = 2.0
T = TypeVar("T")


def pod_of(doc: dict, role: str | None = None, epoch: int | None = None) -> Pod:
    meta, status = doc["metadata"], doc.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in status.get("conditions") or [])
    image = next((c["image"] for c in doc["spec"]["containers"] if c["name"] == CONTAINER), "")
    return Pod(meta["name"], meta.get("uid", ""),
               (meta.get("labels") or {}).get("controller-revision-hash", ""), ready,
               bool(meta.get("deletionTimestamp")), image, role, epoch)


def ordinal(name: str) -> int:
    tail = name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 0


@dataclass
class GroupReport:
    group: str
    steps: list[dict] = field(default_factory=list)
    epoch_before: int | None = None
    epoch_after: int | None = None
    hand_overs: int = 0
    seconds: float = 0.0
    up_to_date: bool = False

    def as_dict(self) -> dict:
        return dict(self.__dict__)


class Rollout:
    def __init__(self, kube: Kubectl, *, timeout_s: float = 600.0,
                 say: Callable[[str], None] = print):
        self.kube, self.timeout_s, self._say = kube, timeout_s, say
        self.t0 = time.monotonic()

    def say(self, text: str) -> None:
        self._say(f"[{time.monotonic() - self.t0:7.1f}s] {text}")

    # ------------------------------------------------------------ observing
    def role(self, pod: str) -> tuple[str | None, int | None, bool]:
        """(role, epoch, ready as the broker says) of a running pod's broker."""
        try:
            rc, out = self.kube.exec(pod, CONTAINER, HEALTH, 10)
        except KubectlError:
            return None, None, False
        try:
            doc = json.loads(out.splitlines()[0]) if out.strip() else {}
        except (json.JSONDecodeError, IndexError):
            return None, None, False
        return doc.get("role"), doc.get("epoch"), rc == 0 and bool(doc.get("ok"))

    def observe(self, sts: dict) -> Group:
        status = sts.get("status") or {}
        docs = sorted(self.kube.pods(sts["spec"]["selector"]["matchLabels"]),
                      key=lambda d: ordinal(d["metadata"]["name"]))
        pods = []
        for d in docs:
            pod = pod_of(d)
            # every running pod is asked, ready or not: a pod that says it is
            # the master is never taken for a broken slave
            if not pod.terminating and (d.get("status") or {}).get("phase") == "Running":
                role, epoch, _ok = self.role(pod.name)
                pod = pod_of(d, role, epoch)
            pods.append(pod)
        return Group(sts["metadata"]["name"], status.get("updateRevision", ""),
                     sts["spec"].get("replicas", 1),
                     (sts["spec"].get("updateStrategy") or {}).get("type", "RollingUpdate"),
                     tuple(pods))

    def refresh(self, name: str) -> Group:
        return self.observe(self.kube.statefulset(name))

    # ------------------------------------------------------------ waiting
    def wait(self, what: str, ok: Callable[[], T | None]) -> T:
        deadline = time.monotonic() + self.timeout_s
        last = None
        while True:
            try:
                got = ok()
            except KubectlError as exc:
                got, last = None, str(exc)
            if got:
                return got
            if time.monotonic() > deadline:
                raise Unhealthy(f"{what}: not done in {self.timeout_s:g} s"
                                + (f" ({last})" if last else ""))
            time.sleep(POLL_S)

    def back_in_sync(self, group: str, name: str, old_uid: str) -> Pod:
        """Wait until ``name`` is a new pod on the update revision, ready,
        its broker a slave in sync."""
        def done() -> Pod | None:
            g = self.refresh(group)
            pod = next((p for p in g.pods if p.name == name), None)
            if pod is None or pod.uid == old_uid or pod.terminating or not pod.ready:
                return None
            if pod.revision != g.update_revision or pod.role != Role.SLAVE:
                return None
            return pod
        return self.wait(f"{name} back on the new revision, ready and in sync", done)

    # ------------------------------------------------------------ acting
    def roll(self, sts: dict, dry_run: bool = False) -> GroupReport:
        t0 = time.monotonic()
        group = self.observe(sts)
        report = GroupReport(group.name)
        check(group)
        master = group.master
        assert master is not None                  # check() saw to it
        report.epoch_before = master.epoch
        steps = plan(group)
        if not steps:
            report.up_to_date = True
            self.say(f"{group.name}: up to date (revision {group.update_revision})")
            return report
        self.say(f"{group.name}: {len(group.outdated)} of {group.replicas} pods to bring to "
                 f"revision {group.update_revision}; master {master.name}")
        for step in steps:
            self.say(f"{group.name}: {'would ' if dry_run else ''}{step.describe()}")
            if dry_run:
                report.steps.append({"step": step.kind, "pod": step.pod, "dry_run": True})
                continue
            s0 = time.monotonic()
            detail = self.carry_out(group.name, step)
            report.steps.append({"step": step.kind, "pod": step.pod,
                                 "seconds": round(time.monotonic() - s0, 1), **detail})
            self.say(f"{group.name}: {step.kind} {step.pod} done in "
                     f"{time.monotonic() - s0:.1f} s")
        if dry_run:
            return report
        after = self.refresh(group.name)
        check(after)
        if after.outdated:
            raise Unhealthy(f"{group.name}: pods still on an old revision: "
                            f"{', '.join(p.name for p in after.outdated)}")
        report.epoch_after = after.master.epoch if after.master else None
        if report.epoch_before is not None and report.epoch_after is not None:
            report.hand_overs = report.epoch_after - report.epoch_before
        planned = sum(1 for s in steps if s.kind == HAND_OVER)
        report.seconds = round(time.monotonic() - t0, 1)
        if report.hand_overs != planned:
            raise Unhealthy(f"{group.name}: the master's epoch moved {report.hand_overs} times "
                            f"for {planned} planned hand-over(s): something else failed over")
        return report

    def carry_out(self, group: str, step: Step) -> dict:
        g = self.refresh(group)
        check(g)                                   # whole before every step
        pod = next(p for p in g.pods if p.name == step.pod)
        if step.kind in (RESTART_SLAVE, RESTART_OLD_MASTER):
            if pod.role != Role.SLAVE and (pod.ready or pod.role == Role.MASTER):
                raise Unhealthy(f"{group}: {pod.name} is {pod.role} now, not a slave: stopping")
            self.kube.delete_pod(pod.name)
            back = self.back_in_sync(group, pod.name, pod.uid)
            return {"image": back.image}
        assert step.kind == HAND_OVER
        if pod.role != Role.MASTER:
            raise Unhealthy(f"{group}: {pod.name} is {pod.role} now, not the master: stopping")
        updated = [p for p in g.pods if p.role == Role.SLAVE and p.ready
                   and p.revision == g.update_revision]
        if not updated:
            raise Unhealthy(f"{group}: no updated slave in sync to hand {pod.name} over to")
        rc, out = self.kube.exec(pod.name, CONTAINER, STEP_DOWN, 120)
        try:
            result = json.loads(out.splitlines()[0])
        except (json.JSONDecodeError, IndexError):
            result = {}
        if rc != 0 or not result.get("handed_over"):
            raise Unhealthy(f"{group}: the hand-over of {pod.name} failed: {out.strip()[-500:]}")

        def settled() -> bool:
            """The old master follows in sync, and the group is whole again:
            the new master's readiness probe, which may have failed while no
            one led, says ready (a check on its stale answer stopped the
            rollout once the follow came quickly)."""
            role, _epoch, ok = self.role(pod.name)
            if role != Role.SLAVE or not ok:
                return False
            try:
                check(self.refresh(group))
            except Unhealthy:
                return False
            return True
        self.wait(f"{pod.name} following the new master, in sync, every pod ready", settled)
        return {"to": result.get("to"), "epoch": result.get("epoch")}
