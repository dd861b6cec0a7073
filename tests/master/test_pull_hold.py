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


def test_only_the_queues_written_to_are_looked_at():
    h = PullRequestHoldService()
    for q in range(1000):
        h.hold("T", q, pull(b"a"))
    asked = []

    def visible_max(topic, qid):
        asked.append(qid)
        return 6
    ready = h.take_ready(visible_max, [("T", 7), ("T", 123), ("U", 0)])
    assert sorted(p.request.queue_offset for p in ready) == [5, 5]
    assert sorted(asked) == [7, 123] and len(h) == 998 and h.per_client == {b"a": 998}
