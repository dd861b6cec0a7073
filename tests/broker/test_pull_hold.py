from duomq.broker.pull_hold import MAX_HELD_PER_CLIENT, HeldPull, PullRequestHoldService
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


def many(identity: bytes, offsets: dict, deadline: float = 10.0) -> HeldPull:
    req = pb.PullManyRequest(pulls=[pb.PullRequest(topic=t, queue_id=q, queue_offset=o)
                                    for (t, q), o in offsets.items()])
    return HeldPull(identity, 2, req, deadline, 0.0, dict(offsets))


def test_a_pull_of_many_queues_is_answered_once_when_any_of_them_is_ready():
    h = PullRequestHoldService()
    m = many(b"a", {("T", 0): 5, ("T", 1): 9, ("U", 0): 0})
    assert h.hold_many(m)
    assert h.hold("T", 1, pull(b"b", offset=9))
    assert len(h) == 2 and h.per_client == {b"a": 1, b"b": 1}
    # queue T/1 grew to 9: not past either pull's offset
    assert h.take_ready(lambda t, q: 9, [("T", 1)]) == []
    # T/0 and T/1 both grew: the PULL_MANY comes back once, and goes from every queue
    ready = h.take_ready(lambda t, q: 10, [("T", 0), ("T", 1), ("U", 0)])
    assert sorted(p.type for p in ready) == [pb.PULL, pb.PULL_MANY]
    assert h.held == {} and h.per_client == {}


def test_a_pull_of_many_queues_expires_and_is_forgotten_as_one():
    h = PullRequestHoldService()
    assert h.hold_many(many(b"a", {("T", q): 0 for q in range(4)}, deadline=1.0))
    assert h.hold_many(many(b"a", {("T", q): 0 for q in range(2, 6)}, deadline=5.0))
    assert len(h) == 2 and h.per_client == {b"a": 2}
    (gone,) = h.take_expired(2.0)
    assert gone.deadline == 1.0 and sorted(h.held) == [("T", q) for q in range(2, 6)]
    assert h.per_client == {b"a": 1}
    assert h.forget(b"a") == 1 and h.held == {} and h.per_client == {}
    assert h.take_ready(lambda t, q: 10) == []
