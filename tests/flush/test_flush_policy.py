from duomq.broker.pull_hold import HeldPull, PullRequestHoldService
from duomq.common.flush_policy import PAGE, should_flush
from duomq.master.ack_waiters import NEVER, AckWaiter, AckWaiters
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
        w.add(AckWaiter(end, 10.0 + end, NEVER, b"id", end, None))
    assert [x.end_offset for x in w.release(250, NEVER)] == [100, 200]
    assert len(w) == 1
    assert w.expire(309.0, 250, NEVER) == []
    assert [(x.end_offset, s) for x, s in w.expire(310.0, 250, NEVER)] == \
        [(300, pb.FLUSH_DISK_TIMEOUT)]


def test_sync_replication_needs_both_conditions_and_names_the_missing_one():
    w = AckWaiters()
    w.add(AckWaiter(100, 5.0, 3.0, b"a", 1, None))
    w.add(AckWaiter(200, 6.0, 4.0, b"b", 2, None))
    assert w.release(150, 50) == []                     # flushed, not replicated
    assert [x.request_id for x in w.release(150, 120)] == [1]
    expired = w.expire(4.5, 250, 150)                   # flushed in time, slave late
    assert [(x.request_id, s) for x, s in expired] == [(2, pb.FLUSH_SLAVE_TIMEOUT)]
    w.add(AckWaiter(300, 7.0, 9.0, b"c", 3, None))
    assert [(x.request_id, s) for x, s in w.expire(7.5, 250, 400)] == [(3, pb.FLUSH_DISK_TIMEOUT)]


def test_held_pulls_wake_on_data_and_expire():
    h = PullRequestHoldService()
    h.hold("T", 0, HeldPull(b"a", 1, pb.PullRequest(queue_offset=5), 10.0))
    h.hold("T", 1, HeldPull(b"b", 2, pb.PullRequest(queue_offset=0), 20.0))
    assert h.take_ready(lambda t, q: 5 if q == 0 else 0) == []   # nothing past 5 yet
    ready = h.take_ready(lambda t, q: 6 if q == 0 else 0)
    assert [p.request_id for p in ready] == [1]
    assert [p.request_id for p in h.take_expired(25.0)] == [2]
    assert len(h) == 0


def test_confirmed_offset_and_link_states():
    from duomq.replication.protocol import (
        HaState,
        confirmed_offset,
        in_sync,
        next_state,
    )
    assert confirmed_offset([500, 300, 900], 1) == 900
    assert confirmed_offset([500, 300, 900], 2) == 500
    assert confirmed_offset([500], 2) is None
    assert in_sync(100, 200, 100) and not in_sync(99, 200, 100)
    s = HaState.READY
    for event, expected in [("report", HaState.HANDSHAKE), ("sent", HaState.TRANSFER),
                            ("silence", HaState.SUSPEND), ("report", HaState.TRANSFER),
                            ("timeout", HaState.SHUTDOWN), ("report", HaState.SHUTDOWN)]:
        s = next_state(s, event)
        assert s is expected
