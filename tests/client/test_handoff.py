"""The old owner's side of a hand-off: commit, unlock, then free the owner
node, in that order; a commit that fails is tried again; a release out of
time still lets the queue go."""

import time

from duomq.client.consumer import handoff as handoff
from duomq.client.consumer.handoff import Releaser
from duomq.client.consumer.process_queue import ProcessQueue
from duomq.common.message import MessageExt, MessageQueue

MQ = MessageQueue("T", "broker-a", 0)


def msgs(*offsets):
    return [MessageExt("T", b"x", "", "", {}, 0, o, 0, 0, 0, "", 0, "broker-a") for o in offsets]


class Steps:
    def __init__(self, commit_fails=0, free_fails=0):
        self.log = []
        self.commit_fails = commit_fails
        self.free_fails = free_fails

    def commit(self, pqs):
        if self.commit_fails:
            self.commit_fails -= 1
            self.log.append("commit failed")
            return False
        self.log.append(("commit", [pq.consumed_offset() for pq in pqs]))
        return True

    def free(self, mqs):
        if self.free_fails:
            self.free_fails -= 1
            self.log.append("free failed")
            return list(mqs)
        self.log.append(("free", mqs))
        return []

    def releaser(self, timeout_s=5.0, unlock=True):
        return Releaser(timeout_s, self.commit,
                        (lambda pqs: self.log.append("unlock")) if unlock else None,
                        self.free,
                        lambda delay: None, lambda: self.log.append("wake"))


def test_the_node_is_freed_only_after_the_begun_chunk_is_done_and_committed():
    steps = Steps()
    r = steps.releaser()
    pq = ProcessQueue(MQ, 0)
    a, b = pq.add(msgs(*range(64)), 64, 640, chunk_size=32)
    assert pq.begin(a)
    r.start([pq])
    assert MQ in r and not pq.pulling
    assert r.poll(again=False) and steps.log == []         # chunk a is still in hand
    a.i = 32
    pq.finish(a)
    pq.leave()
    assert not r.poll(again=False)
    assert steps.log == [("commit", [32]), "unlock", ("free", [MQ]), "wake"]
    assert pq.dropped and MQ not in r
    s = r.stats.summary()
    assert s["released"] == 1 and s["left_to_next_owner"] == 32 and s["timed_out"] == 0


def test_a_failed_commit_is_tried_again_before_the_node_goes(monkeypatch):
    monkeypatch.setattr(handoff, "COMMIT_RETRY_S", 0.0)
    steps = Steps(commit_fails=1)
    r = steps.releaser(unlock=False)
    r.start([ProcessQueue(MQ, 7)])
    assert r.poll(again=False)
    assert steps.log == ["commit failed"]
    assert not r.poll(again=False)
    assert steps.log[1:] == [("commit", [7]), ("free", [MQ]), "wake"]


def test_a_refused_commit_lets_the_queue_go_at_once():
    """The broker refuses the consumer's commits (its user removed, its
    permission taken): no retry can succeed, so the queue goes to its next
    owner at once, not after the deadline and COMMIT_GIVE_UP_S (a removed
    user's consumer took 15 s to shut down)."""
    steps = Steps()
    refused = []
    r = Releaser(60.0, lambda pqs: refused.append(len(pqs)), None, steps.free,
                 lambda delay: None, lambda: steps.log.append("wake"))
    r.start([ProcessQueue(MQ, 7)])
    assert not r.poll(again=False)            # nothing left pending after one try
    assert refused == [1] and steps.log == [("free", [MQ]), "wake"] and MQ not in r


def test_out_of_time_the_queue_is_let_go_and_counted():
    steps = Steps()
    r = steps.releaser(timeout_s=0.05, unlock=False)
    pq = ProcessQueue(MQ, 0)
    (a,) = pq.add(msgs(*range(8)), 8, 80, chunk_size=32)
    assert pq.begin(a)                 # a handler that never returns
    a.i = 2
    r.start([pq])
    time.sleep(0.06)
    r.finish(1.0)
    assert steps.log[0] == ("commit", [2]) and MQ not in r
    assert r.stats.summary()["timed_out"] == 1


def test_an_owner_node_zookeeper_would_not_delete_is_deleted_later():
    steps = Steps(free_fails=1)
    r = steps.releaser(unlock=False)
    r.start([ProcessQueue(MQ, 3)])
    assert r.poll(again=False)                     # released, but the node is still there
    assert steps.log == [("commit", [3]), "free failed", "wake"]
    assert MQ in r                                 # not taken again until it is gone
    assert not r.poll(again=False)
    assert steps.log[-2:] == [("free", [MQ]), "wake"] and MQ not in r


def test_which_failed_commits_the_committer_calls_refused():
    """OffsetCommitter.commit: None (refused: no retry heals it) for a
    request's AUTHENTICATION_FAILED or NOT_AUTHORIZED, from a broker that
    knows its users; False (try again) for a key refused at the handshake,
    which a broker that has not read its users yet does too, and for any
    other failure; True once stored."""
    from types import SimpleNamespace

    from duomq.client.consumer.offset_committer import OffsetCommitter
    from duomq.common.errors import (
        AuthenticationError,
        AuthorizationError,
        BrokerUnreachableError,
    )

    class Store:
        def __init__(self, exc):
            self.exc = exc

        def commit(self, offsets):
            if self.exc is not None:
                raise self.exc

    for exc, want in ((AuthenticationError("AUTHENTICATION_FAILED: user 'u' is not registered"),
                       None),
                      (AuthorizationError("NOT_AUTHORIZED: Group:g:Sub"), None),
                      (AuthenticationError("refused these credentials", at_handshake=True), False),
                      (BrokerUnreachableError("gone"), False),
                      (None, True)):
        committer = OffsetCommitter(SimpleNamespace(group="g"), Store(exc))
        pq = ProcessQueue(MQ, 7)
        pq.committed = 3                      # moved since the last commit
        assert committer.commit([pq]) is want, (exc, want)
