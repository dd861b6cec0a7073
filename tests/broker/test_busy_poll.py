"""The serving loop's busy poll (``busy_poll_us``, ``broker/busy_poll.py``):
it asks every socket the loop polls, returns as soon as one has a message,
gives up after its budget when none has, lets other threads run while it
spins, and stops spinning after MISSES fruitless spins until a short wait
brings it back. Real ZeroMQ sockets."""

import threading
import time

import pytest
import zmq

from duomq.broker.busy_poll import MISSES, BusyPoll

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
    assert (busy.spins, busy.caught, busy.misses) == (1, 1, 0)


def test_with_nothing_to_read_it_gives_up_after_its_budget(pairs):
    readers = [a for a, _b in pairs]
    busy = BusyPoll(3000)                           # 3 ms
    t0 = time.perf_counter_ns()
    assert busy.spin(*readers) is False
    assert time.perf_counter_ns() - t0 >= 3_000_000
    assert (busy.spins, busy.caught, busy.misses) == (1, 0, 1)
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


def test_it_stops_spinning_after_misses_until_a_short_wait(pairs):
    readers = [a for a, _b in pairs]
    busy = BusyPoll(200)
    for _ in range(MISSES):
        assert busy.spin(*readers) is False
    assert busy.spins == MISSES
    pairs[0][1].send(b"x")
    assert busy.spin(*readers) is False           # not spinning: a message waiting is not seen
    assert busy.spins == MISSES
    time.sleep(0.01)
    busy.woke()                                   # a wait of 10 ms: no spin would have caught it
    assert busy.spin(*readers) is False and busy.spins == MISSES
    busy.woke()                                   # at once: a spin would have caught this one
    assert busy.spin(*readers) is True
    assert (busy.spins, busy.caught, busy.misses) == (MISSES + 1, 1, 0)


def test_zero_never_spins(pairs):
    readers = [a for a, _b in pairs]
    pairs[1][1].send(b"x")
    busy = BusyPoll(0)
    for _ in range(2 * MISSES):
        assert busy.spin(*readers) is False
        busy.woke()
    assert (busy.spins, busy.misses) == (0, 0)
