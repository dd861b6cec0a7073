"""The dispatcher's answer book (broker/answers.py): what leaves now, what
waits for the turn's end and in which order, what it counts as woken, and
what a send left for after its ack (its second half in the store, its
visible offsets), paid once. Real parts: a ZeroMQ ROUTER and DEALER over
TCP, a store on disk."""

import pytest
import zmq

from duomq.broker.answers import AnswerBook
from duomq.broker.metrics import BrokerMetrics
from duomq.broker.outbox import PIPE_MESSAGES, Outbox
from duomq.broker.request import Request
from duomq.common.config import BrokerConfig
from duomq.format import record as rec
from duomq.proto import codec, pb
from duomq.store import MessageStore


@pytest.fixture
def wire():
    """The broker's side (a ROUTER as its client port is) and a client's."""
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.ROUTER_MANDATORY, 1)
    router.setsockopt(zmq.SNDHWM, PIPE_MESSAGES)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    dealer = ctx.socket(zmq.DEALER)
    dealer.connect(f"tcp://127.0.0.1:{port}")
    dealer.send(b"hello")                 # the router learns the client's identity
    identity, _ = router.recv_multipart()
    yield router, dealer, identity
    for s in (router, dealer):
        s.close(0)
    ctx.term()


@pytest.fixture
def store(tmp_path):
    s = MessageStore(BrokerConfig(data_dir=str(tmp_path / "d"), segment_size_bytes=1 << 16,
                                  max_message_bytes=4096, cq_entries_per_segment=64))
    s.start()
    # the log's first segment opened: a send that fits it is staged (``rest``)
    s.put_batch("T", 0, bytearray(rec.encode_record(b"T", b"", b"", b"", b"first", 1)), 1)
    yield s
    s.close()


def book_on(router, recompute=lambda: True) -> AnswerBook:
    book = AnswerBook(BrokerMetrics())
    book.bind(Outbox(router, 1 << 20, 10.0), recompute)
    return book


def received(dealer, n: int) -> list[int]:
    """The request ids of the next ``n`` answers the client reads."""
    ids = []
    for _ in range(n):
        assert dealer.poll(2000), f"answer {len(ids) + 1} of {n} did not come"
        ids.append(codec.decode_frame(dealer.recv()).request_id)
    return ids


def test_answers_at_the_turns_end_leave_after_those_of_now_in_the_order_held(wire):
    router, dealer, identity = wire
    book = book_on(router)
    for rid in (1, 2, 3):
        book.at_turn_end(Request(identity, rid, pb.SEND, None), (pb.OK, "", None))
    book.reply(identity, 10, pb.SEND, pb.OK, "", None)
    book.answer(Request(identity, 11, pb.PULL, pb.PullRequest(topic="T")),
                (pb.NO_NEW_MESSAGE, "", pb.PullResponse()))
    assert received(dealer, 2) == [10, 11]
    assert not dealer.poll(100)              # the turn has not ended
    book.end_turn()
    assert received(dealer, 3) == [1, 2, 3]
    book.end_turn()                          # nothing is sent twice
    assert not dealer.poll(100)


def test_only_held_requests_answered_count_as_woken(wire):
    router, dealer, identity = wire
    book = book_on(router)
    book.reply(identity, 1, pb.SEND, pb.OK, "", None)
    book.at_turn_end(Request(identity, 2, pb.SEND, None), (pb.OK, "", None))
    book.end_turn()
    assert book.woken == 0
    book.answer_held(Request(identity, 3, pb.PULL, pb.PullRequest(topic="T")),
                     (pb.NO_NEW_MESSAGE, "", pb.PullResponse()))
    book.reply_held(identity, 4, pb.POP, pb.NO_NEW_MESSAGE, "", pb.PopResponse())
    assert book.woken == 2
    assert received(dealer, 4) == [1, 2, 3, 4]


def put_later(store, body: bytes):
    return store.put_batch("T", 0, bytearray(rec.encode_record(b"T", b"", b"", b"", body, 1)),
                           1, later=True)


def test_a_sends_second_half_is_owed_until_settled_and_written_once(wire, store, c_loops):
    router, _dealer, _identity = wire
    book = book_on(router)
    put = put_later(store, b"one")
    assert put.rest is not None
    book.owe(put.rest)
    fresh, first = book.staged()
    assert (fresh.topic, fresh.queue_id, fresh.queue_offset, first) == \
        ("T", 0, 1, put.physical_offsets[0])
    assert store.find_queue("T", 0).max_offset == 1         # its entries not written yet
    book.settle()
    assert book.staged() is None and store.find_queue("T", 0).max_offset == 2
    book.settle()
    assert store.find_queue("T", 0).max_offset == 2


def test_a_second_half_the_stores_next_write_finished_is_not_staged_any_more(wire, store):
    router, _dealer, _identity = wire
    book = book_on(router)
    book.owe(put_later(store, b"one").rest)
    store.put_batch("T", 0, bytearray(rec.encode_record(b"T", b"", b"", b"", b"two", 1)), 1)
    assert book.staged() is None
    book.serving()
    assert store.find_queue("T", 0).max_offset == 3


def test_owed_offsets_are_computed_once_and_stay_current_until_the_next_request(wire, store):
    router, _dealer, _identity = wire
    calls = []

    def recompute() -> bool:
        calls.append(store.find_queue("T", 0).max_offset)   # after the second half
        return True
    book = book_on(router, recompute)
    book.owe(put_later(store, b"one").rest)
    book.owe_offsets()
    assert book.offsets_owed and not book.current
    book.settle()
    assert calls == [2] and not book.offsets_owed and book.current
    book.settle()
    assert calls == [2]                      # paid once
    book.serving()                           # the next request: no longer current
    assert not book.current
    book.pay()
    assert book.current
    book.end_turn()                          # the turn ends: its news next
    assert not book.current


def test_a_slaves_offsets_are_never_current(wire):
    router, _dealer, _identity = wire
    book = book_on(router, recompute=lambda: False)
    book.owe_offsets()
    book.settle()
    assert not book.current


def test_an_unbound_book_says_so():
    book = AnswerBook(BrokerMetrics())
    book.owe_offsets()
    with pytest.raises(RuntimeError, match="not bound"):
        book.settle()
    with pytest.raises(AssertionError, match="no outbox"):
        book.reply(b"x", 1, pb.SEND, pb.OK, "", None)


def test_an_answer_held_for_a_client_that_is_gone_is_dropped_and_the_rest_leave(wire):
    router, dealer, identity = wire
    book = book_on(router)
    book.at_turn_end(Request(b"nobody-of-this-name", 1, pb.SEND, None), (pb.OK, "", None))
    book.at_turn_end(Request(identity, 2, pb.SEND, None), (pb.OK, "", None))
    book.end_turn()
    assert received(dealer, 1) == [2]
