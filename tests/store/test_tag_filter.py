"""Tag filtering on the consume queue: a subscription's tag codes select
entries without reading the commit log for the others."""

import pytest

from duomq.common.config import BrokerConfig
from duomq.common.message import decode_records
from duomq.common.subscription import parse
from duomq.format import record as rec
from duomq.store import MessageStore
from duomq.store.message_store import FILTER_SCAN_ENTRIES


@pytest.fixture
def store(tmp_path):
    s = MessageStore(BrokerConfig(data_dir=str(tmp_path), segment_size_bytes=8 << 20))
    s.start()
    yield s
    s.close()


def put(store, tags: list[str]):
    buf = bytearray(b"".join(rec.encode_record(b"T", t.encode(), b"", b"", b"body-%06d" % i, 1)
                             for i, t in enumerate(tags)))
    store.put_batch("T", 0, buf, len(tags))


def test_skipped_entries_cost_no_commit_log_reads(store, monkeypatch):
    tags = ["Hit" if i % 100 == 7 else "Miss" for i in range(5000)]   # 1% match
    put(store, tags)
    reads = []
    real_read = store.commitlog.read
    monkeypatch.setattr(store.commitlog, "read",
                        lambda pos, n: reads.append((pos, n)) or real_read(pos, n))
    codes = parse("Hit").codes
    got, off, found = None, 0, []
    while off < 5000:
        got = store.get_messages("T", 0, off, 32, 1 << 20, store.commitlog.max_offset, codes)
        found += decode_records(got.records)
        off = got.next_offset
    assert [m.queue_offset for m in found] == [i for i, t in enumerate(tags) if t == "Hit"]
    assert {m.tags for m in found} == {"Hit"}
    # one read per matching record, each exactly that record
    cq = store.find_queue("T", 0)
    hits = {cq.entry(m.queue_offset)[:2] for m in found}          # (position, size)
    assert sorted(reads) == sorted(hits)
    assert sum(n for _, n in reads) == sum(size for _, size in hits)


def test_a_stretch_without_matches_moves_the_offset_on(store):
    put(store, ["Miss"] * (FILTER_SCAN_ENTRIES + 500) + ["Hit"])
    end = store.commitlog.max_offset
    got = store.get_messages("T", 0, 0, 32, 1 << 20, end, parse("Hit").codes)
    assert (got.status, got.count, got.next_offset) == ("NO_MATCHED_MESSAGE", 0,
                                                        FILTER_SCAN_ENTRIES)
    got = store.get_messages("T", 0, got.next_offset, 32, 1 << 20, end, parse("Hit").codes)
    assert (got.status, got.count, got.next_offset) == ("FOUND", 1, FILTER_SCAN_ENTRIES + 501)
    # no filter: the same backlog reads as before
    got = store.get_messages("T", 0, 0, 32, 1 << 20, end)
    assert (got.count, got.next_offset) == (32, 32)


def test_limits_stop_at_the_first_match_not_taken(store):
    put(store, ["A", "B", "A", "A", "B", "A"])
    end = store.commitlog.max_offset
    got = store.get_messages("T", 0, 0, 2, 1 << 20, end, parse("A").codes)
    assert [m.queue_offset for m in decode_records(got.records)] == [0, 2]
    assert got.next_offset == 3                         # entry 3 (an A) comes next
    got = store.get_messages("T", 0, 3, 10, 1 << 20, end, parse("A || B").codes)
    assert [m.queue_offset for m in decode_records(got.records)] == [3, 4, 5]
