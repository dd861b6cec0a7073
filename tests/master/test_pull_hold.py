from duomq.master.pull_hold import MAX_HELD_PER_CLIENT, HeldPull, PullRequestHoldService
from duomq.proto import pb


def pull(identity: bytes, offset: int = 5, deadline: float = 10.0) -> HeldPull:
    return HeldPull(identity, 1, pb.PullRequest(topic="T", queue_offset=offset), deadline)


def test_a_client_holds_at_most_so_many_pulls_and_counts_come_back():
    h = PullRequestHoldService()
    for _ in range(MAX_HELD_PER_CLIENT):
        assert h.hold("T", 0, pull(b"a"))
    assert not h.hold("T", 0, pull(b"a"))          # answered at once by the caller
    assert h.hold("T", 1, pull(b"b", deadline=1.0))
    assert len(h.take_expired(2.0)) == 1 and "b" not in h.per_client
    assert len(h.take_ready(lambda topic, qid: 6)) == MAX_HELD_PER_CLIENT
    assert h.per_client == {} and h.held == {}
    assert h.hold("T", 0, pull(b"a"))


def test_forget_drops_every_pull_of_a_client():
    h = PullRequestHoldService()
    for q in range(3):
        h.hold("T", q, pull(b"a"))
        h.hold("T", q, pull(b"b"))
    assert h.forget(b"a") == 3
    assert h.per_client == {b"b": 3} and len(h) == 3
