"""duomq.rollout.run against a kubectl stand-in that keeps the pods' state
in memory (the real kubectl and pods: tests/deploy/test_containers.py):
the hand-over step ends only once the group is whole again, the new
master's readiness included. Offline: the step's order of observations,
not a cluster, is what is under test."""

import json

from duomq.rollout import run
from duomq.rollout.plan import HAND_OVER, check
from duomq.rollout.run import Rollout, Step

NEW, OLD = "rev-new", "rev-old"


class StaleProbes:
    """Two pods; broker-a-0 the outdated master, broker-a-1 an updated
    slave. The step-down swaps their roles at once, but the new master's
    readiness (kube's, from its probe) reads False for ``stale`` more looks,
    as a probe that failed while no one led does until it runs again."""

    def __init__(self, stale: int):
        self.roles = {"broker-a-0": "MASTER", "broker-a-1": "SLAVE"}
        self.revisions = {"broker-a-0": OLD, "broker-a-1": NEW}
        self.stale = 0
        self.stale_after_step_down = stale

    def statefulset(self, name):
        return {"metadata": {"name": name},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "duomq"}},
                         "updateStrategy": {"type": "OnDelete"}},
                "status": {"updateRevision": NEW}}

    def pods(self, selector):
        out = []
        for name in sorted(self.roles):
            ready = not (name == "broker-a-1" and self.stale > 0)
            out.append({"metadata": {"name": name, "uid": name,
                                     "labels": {"controller-revision-hash":
                                                self.revisions[name]}},
                        "spec": {"containers": [{"name": "broker", "image": "img"}]},
                        "status": {"phase": "Running", "conditions": [
                            {"type": "Ready", "status": "True" if ready else "False"}]}})
        if self.stale:
            self.stale -= 1
        return out

    def exec(self, pod, container, argv, timeout_s=None):
        if argv == run.STEP_DOWN:
            self.roles = {"broker-a-0": "SLAVE", "broker-a-1": "MASTER"}
            self.stale = self.stale_after_step_down
            return 0, json.dumps({"handed_over": True, "to": 1, "epoch": 8}) + "\n"
        return 0, json.dumps({"role": self.roles[pod], "epoch": 8, "ok": True}) + "\n"


def test_the_hand_over_waits_for_the_new_masters_probe(monkeypatch):
    monkeypatch.setattr(run, "POLL_S", 0.001)
    kube = StaleProbes(stale=5)
    r = Rollout(kube, timeout_s=5, say=lambda _text: None)
    r.carry_out("broker-a", Step(HAND_OVER, "broker-a-0"))
    check(r.refresh("broker-a"))          # the next step's check: whole, not stopped
    assert kube.stale == 0
