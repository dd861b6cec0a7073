"""The producer's spacing of retries against a group that refuses writes."""

from duomq.client.backoff import RefusalBackoff


def test_a_group_that_never_refused_is_tried_at_once():
    b = RefusalBackoff()
    assert b.turn("g", 5.0) == 0.0 and not b.waiting()


def test_refusals_double_the_delay_up_to_the_cap():
    b = RefusalBackoff(0.1, 1.0)
    waits = []
    now = 0.0
    for _ in range(6):
        b.refused("g")
        w = b.turn("g", now)
        waits.append(round(w, 3))
        now += w
    assert waits == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]


def test_many_waiting_sends_take_turns_a_delay_apart():
    """A hundred sends refused at once retry a delay apart, not together:
    at most 1/delay attempts a second against the group."""
    b = RefusalBackoff(0.1, 1.0)
    b.refused("g")
    slots = sorted(b.turn("g", 0.0) for _ in range(100))
    assert slots[0] == 0.1 and all(abs((y - x) - 0.1) < 1e-9 for x, y in zip(slots, slots[1:], strict=False))
    assert sum(1 for s in slots if s <= 1.0) == 10


def test_a_stored_write_resets_the_group_only():
    b = RefusalBackoff()
    b.refused("g")
    b.refused("h")
    b.stored("g")
    assert b.turn("g", 0.0) == 0.0 and b.turn("h", 0.0) > 0
