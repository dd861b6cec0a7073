"""Pending timers by topic from counts per minute (pure)."""

import pytest

from duomq.timer.counts import BUCKET_MS, KEEP_PAST_MS, TimerCounts


def test_pending_counts_the_minutes_ahead_less_what_fired_of_this_one():
    c = TimerCounts()
    t0 = 100 * BUCKET_MS
    for i in range(10):
        c.add("A", t0 + i * 10_000)          # 6 in minute 100, 4 in 101
    c.add("B", t0 + 5 * BUCKET_MS)
    c.add("B", t0 + 5 * BUCKET_MS + 1)
    c.add("B", t0 + 5 * BUCKET_MS, -1)       # one recalled
    assert c.pending(t0) == {"A": 10, "B": 1}
    assert c.pending(t0 + 30_000, {"A": 3}) == {"A": 7, "B": 1}
    assert c.pending(t0 + BUCKET_MS) == {"A": 4, "B": 1}
    assert c.pending(t0 + 6 * BUCKET_MS) == {}


def test_counts_round_trip_and_garbage_is_refused():
    c = TimerCounts()
    c.add("A", 5 * BUCKET_MS + 7, 3)
    back = TimerCounts.decode(c.encode())
    assert back.pending(0) == {"A": 3}
    for bad in (b"", b"junk", b"x\x9c\x03\x00\x00\x00\x00\x01"):
        with pytest.raises(ValueError):
            TimerCounts.decode(bad)


def test_minutes_a_day_past_are_forgotten():
    c = TimerCounts()
    now = 10 ** 12
    c.add("A", now - KEEP_PAST_MS - BUCKET_MS)
    c.add("B", now + BUCKET_MS)
    c.prune(now)
    assert list(c.buckets) == ["B"]


def test_a_batch_is_counted_as_one_by_one(hot_loops):
    import random
    rng = random.Random(5)
    ats = sorted(rng.randrange(-180_000, 600_000) for _ in range(500)) + [5, 5, 70_000, -1]
    many, one = TimerCounts(), TimerCounts()
    for c in (many, one):
        c.add("T", 30_000, 4)                            # what was counted before
    many.add_many("T", ats)
    for at in ats:
        one.add("T", at)
    assert many.buckets == one.buckets and sum(many.buckets["T"].values()) == len(ats) + 4
    assert many.buckets["T"][-1] == one.buckets["T"][-1] > 0       # floor: before the epoch
