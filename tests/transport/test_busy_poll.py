"""The serving loop's busy poll (``busy_poll_us``, ``broker/busy_poll.py``):
it asks every socket the loop polls, returns as soon as one has a message,
gives up after its budget when none has, lets other threads run while it
spins, and spins only while at least PAYS of recent waits were short enough
for a spin to catch. Real ZeroMQ sockets."""

import threading
import time

import pytest
import zmq

from duomq.transport.busy_poll import PAYS, PROBE_EVERY, WEIGHT, BusyPoll

LONG_US = 30_000_000          # 30 s: only a message ends such a spin


@pytest.fixture
def pairs():
    ctx = zmq.Context()
    made = []
    for i in range(3):
        a, b = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
        a.bind(f"inproc://busy-{i}")
        b.connect(f"inproc://busy-{i}")
        made.append((a, b))
    yield made
    for a, b in made:
        a.close(0)
        b.close(0)
    ctx.term()


@pytest.mark.parametrize("which", [0, 1, 2])
def test_a_message_on_any_socket_ends_the_spin_at_once(pairs, which):
    readers = [a for a, _b in pairs]
    pairs[which][1].send(b"news")
    busy = BusyPoll(LONG_US)
    t0 = time.monotonic()
    assert busy.spin(*readers) is True
    assert time.monotonic() - t0 < 25
    assert readers[which].recv(zmq.NOBLOCK) == b"news"   # asked, not read
    assert (busy.spins, busy.caught) == (1, 1)


def test_with_nothing_to_read_it_gives_up_after_its_budget(pairs):
    readers = [a for a, _b in pairs]
    busy = BusyPoll(3000)                           # 3 ms
    t0 = time.perf_counter_ns()
    assert busy.spin(*readers) is False
    assert time.perf_counter_ns() - t0 >= 3_000_000
    assert (busy.spins, busy.caught) == (1, 0) and busy.rate < 1
    assert 3_000_000 <= busy.spent_ns <= time.perf_counter_ns() - t0
    for r in readers:
        assert not r.poll(0)


def test_another_thread_runs_while_it_spins(pairs):
    """The spin holds the GIL between questions: the thread that sends the
    message it waits for must still get it."""
    readers = [a for a, _b in pairs]
    later = threading.Timer(0.05, lambda: pairs[2][1].send(b"late"))
    later.start()
    t0 = time.monotonic()
    assert BusyPoll(LONG_US).spin(*readers) is True
    later.join()
    assert 0.04 <= time.monotonic() - t0 < 25
    assert readers[2].recv(zmq.NOBLOCK) == b"late"


def test_it_stops_spinning_while_spins_do_not_pay_and_starts_again_when_they_would(pairs):
    readers = [a for a, _b in pairs]
    busy = BusyPoll(200)
    while busy.rate >= PAYS:                      # fruitless spins: each one counted
        assert busy.spin(*readers) is False
        busy.woke()                               # (poll's news, later: not counted again)
    spun = busy.spins
    assert 2 <= spun <= WEIGHT
    pairs[0][1].send(b"x")
    assert busy.spin(*readers) is False           # not spinning: a waiting message is not seen
    assert busy.spins == spun
    time.sleep(0.01)
    busy.woke()                                   # 10 ms, not spun on: not counted (a wake-up
    low = busy.rate                               # may be what made it long)
    assert low == pytest.approx(busy.rate)
    while busy.rate < PAYS:                       # short waits, not spun on: each one counted
        assert busy.spin(*readers) is False
        busy.woke()
    assert busy.rate > low and busy.spins == spun
    assert busy.spin(*readers) is True            # spinning again: the message is seen
    assert (busy.spins, busy.caught) == (spun + 1, 1)


def test_a_long_wait_it_did_not_spin_on_is_not_counted(pairs):
    busy = BusyPoll(200)
    busy.rate = PAYS
    busy.spin()                                   # no sockets: gives up at once, a miss
    assert busy.rate < PAYS
    busy.rate = PAYS + 0.01
    busy.since_ns = time.perf_counter_ns() - 1_000_000   # the turn ended 1 ms ago
    busy.spun = False
    busy.woke()
    assert busy.rate == PAYS + 0.01


def test_while_off_every_sixteenth_wait_is_a_probe_and_caught_probes_turn_it_on(pairs):
    """The trap the probes undo: a sleeping thread's every wait looks long
    (its wake-up is in it), so only a spin can tell that answers come soon.
    Off, it spins on one wait in PROBE_EVERY; each probe that catches its
    message counts, and enough of them turn the spin on again."""
    readers = [a for a, _b in pairs]
    busy = BusyPoll(200)
    busy.rate = 0.0
    pairs[1][1].send(b"soon")                      # every wait would be caught at once
    probes = 0
    for i in range(1, 20 * PROBE_EVERY):
        caught = busy.spin(*readers)
        if busy.rate >= PAYS:
            break
        assert caught is (i % PROBE_EVERY == 0)    # only the probes spin
        probes += caught
        time.sleep(0.001)                          # the sleeping thread's wake-up: past
        busy.woke()                                # the 200 us budget, not counted
    assert busy.rate >= PAYS and 5 <= probes <= 7  # about six caught probes from 0 to PAYS
    assert busy.spin(*readers) is True             # and now every wait is spun on
    assert busy.spin(*readers) is True


def test_zero_never_spins(pairs):
    readers = [a for a, _b in pairs]
    pairs[1][1].send(b"x")
    busy = BusyPoll(0)
    for _ in range(2 * WEIGHT):
        assert busy.spin(*readers) is False
        busy.woke()
    assert busy.spins == 0


def test_the_loop_sleeps_until_what_is_due_and_no_longer_than_housekeeping():
    """``server.poll_ms``: a lingering transfer due in 0.4 ms wakes the loop
    in 1 ms (not at housekeeping, 50 ms on); one overdue: no sleep."""
    from duomq.broker.server import poll_ms
    assert poll_ms(10.0, None, 0.05) == 50
    assert poll_ms(10.0, 10.0004, 0.05) == 1
    assert poll_ms(10.0, 10.020, 0.05) == 20
    assert poll_ms(10.0, 9.0, 0.05) == 0
    assert poll_ms(10.0, 11.0, 0.05) == 50


def test_a_spin_in_one_call_counts_as_a_spin_of_questions_does():
    """``spin_with``: the whole spin is one call that asks until its end (a
    client's reads in C, ``ZmtpDealer.spin_read``). It gets the same end
    and is counted the same way: caught or not, its time, the hit rate,
    and no call at all while a spin does not pay but for the probes."""
    ends = []

    def never(end_ns):
        ends.append(end_ns)
        while time.perf_counter_ns() < end_ns:
            pass
        return False

    busy = BusyPoll(3000)                           # 3 ms
    t0 = time.perf_counter_ns()
    assert busy.spin_with(never) is False
    assert len(ends) == 1 and t0 + 3_000_000 <= ends[0] <= time.perf_counter_ns()
    assert (busy.spins, busy.caught) == (1, 0) and busy.rate < 1
    assert 3_000_000 <= busy.spent_ns <= time.perf_counter_ns() - t0
    assert busy.spin_with(lambda end_ns: True) is True
    assert (busy.spins, busy.caught) == (2, 1)
    while busy.rate >= PAYS:
        busy.spin_with(never)
        busy.woke()
    calls = len(ends)
    for i in range(1, PROBE_EVERY + 1):             # off: only the probe asks
        busy.spin_with(never)
        assert len(ends) == calls + (i == PROBE_EVERY)
    assert BusyPoll(0).spin_with(never) is False and len(ends) == calls + 1
