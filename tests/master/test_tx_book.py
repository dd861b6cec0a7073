"""The transaction book (pure): pending halves, ends recorded once, repeated
and conflicting ends, check-backs due, and check points from which a new
master rebuilds the same book."""

import pytest

from duomq.common.transaction import TransactionState as S
from duomq.master.tx_book import (
    CHECKED,
    COMMITTED,
    ROLLED_BACK,
    Half,
    Outcome,
    TransactionBook,
    decode_op,
    encode_op,
)


def half(q, offset=None, stored=0, group="pg"):
    return Half(offset if offset is not None else 1000 + 100 * q, q, stored, group)


def test_ops_round_trip_and_garbage_is_refused():
    assert decode_op(encode_op(COMMITTED, 123)) == (COMMITTED, 123)
    for bad in (b"", b"X" + bytes(8), encode_op(COMMITTED, 1)[:-1]):
        with pytest.raises(ValueError):
            decode_op(bad)


def test_an_end_is_written_once_and_repeated_or_contradicted_ends_change_nothing():
    book = TransactionBook(0, 0)
    book.add_half(half(0))
    assert book.decide(1000, S.COMMIT) is Outcome.WRITE
    book.ended_now(1000, S.COMMIT)
    assert book.decide(1000, S.COMMIT) is Outcome.ALREADY
    assert book.decide(1000, S.ROLLBACK) is Outcome.CONFLICT
    assert book.decide(5, S.COMMIT) is Outcome.UNKNOWN
    book.add_op(0, COMMITTED, 1000)             # its own op read back: nothing new
    assert book.decide(1000, S.COMMIT) is Outcome.ALREADY and not book.pending


def test_check_backs_are_due_after_the_timeout_at_most_every_interval_oldest_first():
    book = TransactionBook(0, 0)
    for q, stored in enumerate((0, 100, 5000)):
        book.add_half(half(q, stored=stored))
    assert [h.queue_offset for h in book.due(6000, 3000, 1000, 10)] == [0, 1]
    assert [h.queue_offset for h in book.due(6000, 3000, 1000, 1)] == [0]
    book.pending[1000].last_check_ms = 5500
    assert [h.queue_offset for h in book.due(6000, 3000, 1000, 10)] == [1]
    book.add_op(0, CHECKED, 1000)
    assert book.pending[1000].checks == 1


def test_a_new_master_rebuilds_the_book_from_the_check_points():
    """Halves h0..h3; h1 committed, h0 rolled back, h2 checked once; h3
    pending. The check points skip what ended before the first pending
    half; a book read from them holds the same pending set."""
    events = [("half", 0), ("half", 1), ("op", COMMITTED, 1), ("half", 2),
              ("op", ROLLED_BACK, 0), ("op", CHECKED, 2), ("half", 3), ("op", COMMITTED, 2)]
    book = TransactionBook(0, 0)
    halves, ops = [], []
    for e in events:
        if e[0] == "half":
            halves.append(half(e[1]))
            book.add_half(halves[-1])
        else:
            ops.append((e[1], 1000 + 100 * e[2]))
            book.add_op(len(ops) - 1, *ops[-1])
    assert list(book.pending) == [1300]
    half_point, op_point = book.check_points()
    assert (half_point, op_point) == (3, 4)
    again = TransactionBook(half_point, op_point)
    for h in halves[half_point:]:
        again.add_half(half(h.queue_offset))
    for i, op in enumerate(ops[op_point:], op_point):
        again.add_op(i, *op)
    assert list(again.pending) == [1300]


def test_a_pending_half_keeps_the_ops_after_it_for_a_new_master():
    book = TransactionBook(0, 0)
    book.add_half(half(0))
    book.add_half(half(1))
    book.add_op(0, COMMITTED, 1100)            # h1 ends; h0 still pending
    book.add_op(1, CHECKED, 1000)
    assert book.check_points() == (0, 0)       # a new master must read h1's end again
    again = TransactionBook(0, 0)
    again.add_half(half(0))
    again.add_half(half(1))
    again.add_op(0, COMMITTED, 1100)
    again.add_op(1, CHECKED, 1000)
    assert list(again.pending) == [1000] and again.pending[1000].checks == 1


def test_ops_about_halves_not_read_yet_wait_for_them():
    book = TransactionBook(0, 0)
    book.add_half(half(0))
    book.add_op(0, COMMITTED, 1100)            # h1 not read yet
    book.add_half(half(1))
    assert list(book.pending) == [1000]
    assert book.decide(1100, S.COMMIT) is Outcome.ALREADY
