"""duomq.rollout.plan: the order a rollout brings a broker group to its
update revision (slaves first, one hand-over, the old master last), and the
groups it refuses to touch."""

import pytest

from duomq.rollout.plan import (
    HAND_OVER,
    RESTART_OLD_MASTER,
    RESTART_SLAVE,
    Group,
    Pod,
    Unhealthy,
    check,
    plan,
)
from duomq.rollout.run import ordinal, pod_of

NEW, OLD = "broker-a-new", "broker-a-old"


def pod(i, role, revision=OLD, ready=True, terminating=False):
    return Pod(f"broker-a-{i}", f"uid-{i}", revision, ready, terminating, "img", role, 7)


def group(*pods, replicas=None, strategy="OnDelete"):
    return Group("broker-a", NEW, len(pods) if replicas is None else replicas, strategy, pods)


def steps(g):
    return [(s.kind, s.pod) for s in plan(g)]


def test_slaves_first_then_one_hand_over_then_the_old_master():
    # pod -1 the master: the controller's ordinal order would hand over twice
    g = group(pod(0, "SLAVE"), pod(1, "MASTER"))
    check(g)
    assert steps(g) == [(RESTART_SLAVE, "broker-a-0"), (HAND_OVER, "broker-a-1"),
                        (RESTART_OLD_MASTER, "broker-a-1")]
    g = group(pod(0, "MASTER"), pod(1, "SLAVE"), pod(2, "SLAVE"))
    assert steps(g) == [(RESTART_SLAVE, "broker-a-1"), (RESTART_SLAVE, "broker-a-2"),
                        (HAND_OVER, "broker-a-0"), (RESTART_OLD_MASTER, "broker-a-0")]


def test_a_rollout_resumed_after_a_stop_does_only_what_is_left():
    # the slave already updated: no second restart of it
    g = group(pod(0, "MASTER"), pod(1, "SLAVE", NEW))
    assert steps(g) == [(HAND_OVER, "broker-a-0"), (RESTART_OLD_MASTER, "broker-a-0")]
    # only a slave behind: no hand-over at all
    g = group(pod(0, "MASTER", NEW), pod(1, "SLAVE"))
    assert steps(g) == [(RESTART_SLAVE, "broker-a-1")]
    assert steps(group(pod(0, "MASTER", NEW), pod(1, "SLAVE", NEW))) == []


@pytest.mark.parametrize("g,why", [
    (group(pod(0, "MASTER"), pod(1, "SLAVE"), strategy="RollingUpdate"), "not OnDelete"),
    (group(pod(0, "MASTER"), replicas=2), "1 of 2 pods exist"),
    (group(pod(0, "MASTER"), pod(1, "SLAVE", NEW, ready=False)),
     "not ready (a slave not in sync)"),
    (group(pod(0, "MASTER", ready=False), pod(1, "SLAVE")), "broker-a-0 is not ready"),
    (group(pod(0, "MASTER"), pod(1, "SLAVE", terminating=True)), "terminating"),
    (group(pod(0, "SLAVE"), pod(1, "SLAVE")), "0 masters"),
    (group(pod(0, "MASTER"), pod(1, "MASTER")), "2 masters"),
    (group(pod(0, "MASTER"), pod(1, None)), "did not say its role"),
    (group(pod(0, None, ready=False), pod(1, "SLAVE")), "0 masters"),
])
def test_an_unhealthy_group_is_not_touched(g, why):
    with pytest.raises(Unhealthy, match=why.replace("(", r"\(").replace(")", r"\)")):
        check(g)


def test_a_lone_master_is_not_restarted_by_a_rollout():
    g = group(pod(0, "MASTER"))
    check(g)
    with pytest.raises(Unhealthy, match="cannot hand over"):
        plan(g)


def test_pods_are_read_as_kubectl_gives_them():
    doc = {"metadata": {"name": "broker-a-1", "uid": "u1",
                        "labels": {"controller-revision-hash": "broker-a-abc"},
                        "deletionTimestamp": "2026-11-26T16:00:00Z"},
           "spec": {"containers": [{"name": "broker", "image": "r.example/duomq:1"}]},
           "status": {"phase": "Running",
                      "conditions": [{"type": "Ready", "status": "True"}]}}
    p = pod_of(doc, "SLAVE", 3)
    assert (p.name, p.uid, p.revision, p.ready, p.terminating, p.image, p.role, p.epoch) == (
        "broker-a-1", "u1", "broker-a-abc", True, True, "r.example/duomq:1", "SLAVE", 3)
    doc["status"]["conditions"][0]["status"] = "False"
    del doc["metadata"]["deletionTimestamp"]
    assert not pod_of(doc).ready and not pod_of(doc).terminating
    assert ordinal("broker-a-12") == 12


def test_a_broken_pod_of_an_earlier_rollout_is_restarted_first():
    """A slave left not ready by a bad revision: restarting it on the new
    one mends it, before anything else; a master not ready is never
    touched, nor a ready pod that does not answer."""
    g = group(pod(0, "MASTER"), pod(1, "SLAVE"), pod(2, None, ready=False))
    check(g)
    assert steps(g) == [(RESTART_SLAVE, "broker-a-2"), (RESTART_SLAVE, "broker-a-1"),
                        (HAND_OVER, "broker-a-0"), (RESTART_OLD_MASTER, "broker-a-0")]
