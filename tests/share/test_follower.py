"""A slave's share follower against a real store: caught up in bounded
steps it holds what a full replay holds, across segment rolls; a promotion
hands over the book at the log's end; reset starts it afresh."""

import pytest

from duomq.common.config import BrokerConfig
from duomq.common.names import SHARE_LOG_TOPIC
from duomq.format import record as rec
from duomq.share.book import ShareFollower, encode_op, replay
from duomq.store import MessageStore


@pytest.fixture
def store(tmp_path):
    s = MessageStore(BrokerConfig(data_dir=str(tmp_path), segment_size_bytes=1 << 16,
                                  max_message_bytes=4096, max_pull_bytes=1 << 16,
                                  cq_entries_per_segment=64))
    s.start()
    yield s
    s.close()


def write(store, ops):
    store.put_records([(SHARE_LOG_TOPIC, 0, rec.encode_record(
        SHARE_LOG_TOPIC.encode(), b"", b"", b"", encode_op(op), 1)) for op in ops])


def pops(lo, hi, q=0):
    return [{"op": "pop", "g": "g", "t": "T", "q": q, "s": 0, "p": o, "n": o + 1,
             "i": [[o, 1]], "d": 10**13, "a": 1} for o in range(lo, hi)]


def state(book):
    return {k: (q.start, q.next, sorted(q.held), sorted(q.done)) for k, q in book.queues.items()}


def test_caught_up_in_steps_it_holds_what_a_replay_holds(store):
    f = ShareFollower()
    assert f.catch_up(store)                     # no share log yet
    write(store, pops(0, 300))                   # several consume-queue segments
    write(store, [{"op": "ack", "g": "g", "t": "T", "q": 0, "o": list(range(0, 300, 2))}])
    steps = 0
    while not f.catch_up(store, most=50):
        steps += 1
    assert steps >= 5
    assert state(f.book) == state(replay(store))
    write(store, pops(300, 310) + [{"op": "ack", "g": "g", "t": "T", "q": 0, "o": [1, 3]}])
    book = f.hand_over(store)                    # a promotion: the tail applied now
    assert state(book) == state(replay(store))
    assert book.queue(("g", "T", 0)).start == 5 and 5 in book.queue(("g", "T", 0)).held
    assert f.applied is None and f.book.queues == {}    # afresh for the next term


def test_reset_starts_again_from_the_log(store):
    f = ShareFollower()
    write(store, pops(0, 20))
    f.catch_up(store)
    f.book.queues.clear()                        # as if it had applied ops a cut took
    f.reset()
    f.catch_up(store)
    assert state(f.book) == state(replay(store))
