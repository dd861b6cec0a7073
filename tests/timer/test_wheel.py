"""The wheel on a real index: timers fire at their time and never before,
slot by slot; memory holds at most ``hold`` of a slot's timers (the rest fire
as it empties, within the slot); recalls (in the index, taken but not yet
indexed, indexed while the slot is open) keep a timer from firing; a timer
indexed for a slot already passed fires at once, with its queue offset."""

import random

from duomq.timer.index import RECALL, TimerIndex
from duomq.timer.wheel import Wheel

T0 = 1_800_000_000_000


def fired(wheel, now, most=10_000):
    return [e.phys for _q, e in wheel.due(now, most)]


def test_timers_fire_at_their_time_in_time_order_and_never_early(tmp_path):
    idx = TimerIndex(str(tmp_path), slot_ms=100, slots=1000)
    rng = random.Random(7)
    times = {phys: T0 + rng.randrange(0, 3000) for phys in range(500)}
    for phys, at in times.items():
        idx.add(at, phys, 10)
    wheel = Wheel(idx, T0, hold=1000)
    seen = {}
    for now in range(T0 - 50, T0 + 3200, 7):
        for phys in fired(wheel, now):
            assert phys not in seen
            seen[phys] = now
    assert seen.keys() == times.keys()
    for phys, now in seen.items():
        assert times[phys] <= now < times[phys] + 7          # at the first look past its time
    assert wheel.slot == T0 + 3200 - 100 or wheel.slot >= T0 + 3000


def test_a_slot_with_more_timers_than_memory_holds_fires_them_all_within_the_slot(tmp_path):
    idx = TimerIndex(str(tmp_path), slot_ms=1000, slots=100)
    for phys in range(300):
        idx.add(T0 + (phys * 37) % 1000, phys, 10)
    wheel = Wheel(idx, T0, hold=20)
    out, most_held = {}, 0
    for now in range(T0, T0 + 1001, 5):
        for phys in fired(wheel, now):
            out[phys] = now
        most_held = max(most_held, wheel.held())
    assert len(out) == 300 and most_held <= 20
    assert all(out[p] >= T0 + (p * 37) % 1000 for p in out)       # never early
    assert wheel.slot == T0 + 1000


def test_recalled_timers_never_fire(tmp_path):
    idx = TimerIndex(str(tmp_path), slot_ms=1000, slots=100)
    for phys in range(10):
        idx.add(T0 + 100 * phys, phys, 10)
    idx.add(T0 + 300, 1000, 10, RECALL, origin=3)            # in the index before it opens
    wheel = Wheel(idx, T0, hold=100)
    wheel.ask_recall(5, T0 + 500)                            # taken, not indexed yet
    assert fired(wheel, T0 + 150) == [0, 1]
    idx.add(T0 + 800, 1001, 10, RECALL, origin=8)            # indexed while the slot is open
    wheel.indexed(idx.recalls(T0)[0], 11)
    assert wheel.is_recalled(8, T0 + 800) and wheel.is_recalled(3, T0 + 300)
    assert not wheel.is_recalled(9, T0 + 900)
    assert fired(wheel, T0 + 2000) == [2, 4, 6, 7, 9]
    assert wheel.recalled == 3


def test_a_timer_indexed_for_a_passed_slot_fires_at_once_with_its_queue_offset(tmp_path):
    idx = TimerIndex(str(tmp_path), slot_ms=1000, slots=100)
    wheel = Wheel(idx, T0, hold=100)
    assert fired(wheel, T0 + 2500) == [] and wheel.slot == T0 + 2000
    idx.add(T0 + 1500, 77, 10)                               # its slot has passed
    wheel.indexed(idx.entries(T0 + 1000)[0], 41)
    assert wheel.oldest_late() == 41 and wheel.next_due() == 0
    assert [(q, e.phys) for q, e in wheel.due(T0 + 2500, 10)] == [(41, 77)]
    idx.add(T0 + 2600, 78, 10)                               # the open slot's: held
    assert T0 + 2600 < wheel.near()
    wheel.indexed(idx.entries(T0 + 2000)[0], 42)
    assert wheel.next_due() == T0 + 2600 and fired(wheel, T0 + 2599) == []
    assert fired(wheel, T0 + 2600) == [78]
    idx.add(T0 + 5000, 79, 10)                               # a later slot's: the wheel has it
    assert wheel.near() <= T0 + 5000                         # (the send path need not tell it)
    wheel.indexed(idx.entries(T0 + 5000)[0], 43)
    assert wheel.held() == 0 and fired(wheel, T0 + 4999) == [] and fired(wheel, T0 + 5000) == [79]


def test_fired_through_moves_with_time_and_a_resumed_wheel_skips_what_fired_before(tmp_path):
    idx = TimerIndex(str(tmp_path), slot_ms=1000, slots=100)
    for phys, at in enumerate((T0 + 100, T0 + 200, T0 + 700)):
        idx.add(at, phys, 10)
    wheel = Wheel(idx, T0 - 5000, hold=100)
    assert fired(wheel, T0 + 250) == [0, 1] and wheel.through == T0 + 251
    assert fired(wheel, T0 + 260, most=0) == [] and wheel.through == T0 + 251
    # the next master resumes at the time this one fired through: the rest only
    again = Wheel(idx, wheel.through, hold=100)
    assert fired(again, T0 + 2000) == [2] and again.through == T0 + 2001
    # a timer indexed due before through is late (the resume reads those again)
    idx.add(T0 + 150, 9, 10)
    again.indexed(idx.entries(T0)[-1], 5)
    assert again.oldest_late() == 5 and fired(again, T0 + 2000) == [9]
