"""A pull of exactly the batch written last is answered from the bytes as
written (``Fresh``), without reading the queue and the log back: the answer
must be the one the read gives, for every pull of every batch (across
segment rolls, tag filters, count and byte limits, an end not yet visible),
and the shortcut must never outlive a change of the log it did not make (a
slave's cut, a replicated write)."""

import random

import pytest

from duomq.common.config import BrokerConfig
from duomq.format import record as rec
from duomq.store import MessageStore


@pytest.fixture
def store(tmp_path):
    s = MessageStore(BrokerConfig(data_dir=str(tmp_path), segment_size_bytes=4096,
                                  cq_entries_per_segment=7, max_message_bytes=1024,
                                  max_pull_bytes=1 << 20))
    s.start()
    yield s
    s.close()


def batch(rnd: random.Random, n: int, tags=(b"", b"a", b"b")) -> tuple[bytes, int]:
    k = rnd.choice((1, 1, 1, 2, 3, 6))
    data = b"".join(rec.encode_record(b"T", rnd.choice(tags), b"", b"",
                                      b"%d-%d:" % (n, i) + b"x" * rnd.randrange(0, 600), 1)
                    for i in range(k))
    return data, k


def one(rnd: random.Random, n: int) -> tuple[bytearray, int]:
    data, k = batch(rnd, n)
    return bytearray(data), k


def read_back(s: MessageStore, *args, **kwargs):
    """get_messages without the shortcut."""
    fresh, s.fresh = s.fresh, None
    try:
        return s.get_messages(*args, **kwargs)
    finally:
        s.fresh = fresh


def test_every_pull_of_the_batch_written_last_answers_as_the_read_does(store):
    rnd = random.Random(7)
    s = store
    codes = {rec.tag_hash(b"a")}
    shortcut = 0
    for n in range(400):
        qid = rnd.randrange(3)
        data, k = batch(rnd, n)
        put = s.put_batch("T", qid, bytearray(data), k)
        end = put.end_offset
        assert s.fresh is not None and s.fresh.queue_offset == put.queue_offset
        for _ in range(6):
            offset = put.queue_offset + rnd.choice((0, 0, 0, -1, 1, -2))
            if offset < 0:
                continue
            args = ("T", qid, offset, rnd.choice((1, 2, k, 32)),
                    rnd.choice((1, len(data) - 1, len(data), 1 << 20)),
                    rnd.choice((end, end, end - 1, put.physical_offsets[0])),
                    rnd.choice((None, None, frozenset(codes))))
            want = read_back(s, *args)
            got = s.get_messages(*args)
            assert (got.records, got.count, got.next_offset, got.min_offset, got.max_offset,
                    got.status) == (want.records, want.count, want.next_offset,
                                    want.min_offset, want.max_offset, want.status), args
            assert isinstance(got.records, bytes)
        # the plain case: a consumer at the queue's end, everything visible,
        # takes the shortcut (the log is not read) and gets the whole batch,
        # unless it crosses a consume-queue segment (where a read stops)
        if put.queue_offset // 7 != (put.queue_offset + k - 1) // 7:
            continue
        reads = s.commitlog.read
        s.commitlog.read = None          # called: TypeError
        try:
            got = s.get_messages("T", qid, put.queue_offset, 32, 1 << 20, end)
        finally:
            s.commitlog.read = reads
        assert got.records == bytes(s.fresh.records) and got.count == k
        shortcut += 1
    assert len(s.commitlog.mfq.segments) > 20 and shortcut > 300


def test_the_shortcut_ends_with_any_change_of_the_log_it_did_not_make(store):
    s = store
    rnd = random.Random(3)
    first = s.put_batch("T", 0, *one(rnd, 0))
    data, k = batch(rnd, 1)
    second = s.put_batch("T", 0, bytearray(data), k)
    assert s.fresh is not None and s.fresh.end == second.end_offset
    s.truncate_to(first.end_offset)                  # a slave's cut
    assert s.fresh is None
    assert s.get_messages("T", 0, 1, 32, 1 << 20, s.commitlog.max_offset).count == 0
    s.put_batch("T", 0, bytearray(data), k)
    assert s.fresh is not None
    s.append_raw(s.commitlog.max_offset, rec.encode_record(b"T", b"", b"", b"", b"r", 1))
    assert s.fresh is None                           # a replicated write
    # a batch followed by any other write is read back
    s.put_batch("T", 1, *one(rnd, 2))
    s.put_batch("T", 2, *one(rnd, 3))
    reads = s.commitlog.read
    s.commitlog.read = None
    try:
        with pytest.raises(TypeError):
            s.get_messages("T", 1, 0, 32, 1 << 20, s.commitlog.max_offset)
    finally:
        s.commitlog.read = reads
