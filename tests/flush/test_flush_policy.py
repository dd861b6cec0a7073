from duomq.flush.services import PAGE, should_flush
from duomq.master.ack_waiters import AckWaiter, AckWaiters
from duomq.master.pull_hold import HeldPull, PullRequestHoldService
from duomq.proto import pb


def test_async_flush_waits_for_enough_dirty_pages():
    assert should_flush(3 * PAGE, 4, 1000, 0, 10_000) == (False, False)
    assert should_flush(4 * PAGE, 4, 1000, 0, 10_000) == (True, False)
    assert should_flush(1, 4, 10_000, 0, 10_000) == (True, True)     # thorough flush
    assert should_flush(0, 4, 10_000, 0, 10_000) == (False, True)
    assert should_flush(1, 0, 1000, 0, 10_000) == (True, False)      # least_pages 0: always


def test_one_flush_releases_every_covered_waiter_in_order():
    w = AckWaiters()
    for end in (100, 200, 300):
        w.add(AckWaiter(end, 10.0 + end, b"id", end, None))
    assert [x.end_offset for x in w.release(250)] == [100, 200]
    assert len(w) == 1
    assert [x.end_offset for x in w.expire(400.0)] == [300]
    assert w.next_deadline() is None


def test_held_pulls_wake_on_data_and_expire():
    h = PullRequestHoldService()
    h.hold("T", 0, HeldPull(b"a", 1, pb.PullRequest(queue_offset=5), 10.0))
    h.hold("T", 1, HeldPull(b"b", 2, pb.PullRequest(queue_offset=0), 20.0))
    assert h.take_ready(lambda t, q: 5 if q == 0 else 0) == []   # nothing past 5 yet
    ready = h.take_ready(lambda t, q: 6 if q == 0 else 0)
    assert [p.request_id for p in ready] == [1]
    assert [p.request_id for p in h.take_expired(25.0)] == [2]
    assert len(h) == 0
