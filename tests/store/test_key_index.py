"""The key index: lookups newest first within a time range, checked against
the records (collisions, cut-away entries), across file rollovers, restarts,
a slave's dispatch and truncation, and retention."""

import os
import time

import pytest

from duomq.common.config import BrokerConfig
from duomq.common.message import decode_records
from duomq.format import record as rec
from duomq.store import MessageStore
from duomq.store.index_file import IndexFile
from duomq.store.key_index import key_hash

BIG = 1 << 30


def cfg(path, **kw):
    base = dict(data_dir=str(path), segment_size_bytes=1 << 16, max_message_bytes=4096,
                max_pull_bytes=1 << 16, cq_entries_per_segment=64,
                index_slot_count=16, index_max_entries=40)
    base.update(kw)
    return BrokerConfig(**base)


def put(store, keys, topic="T", body=b"b"):
    data = b"".join(rec.encode_record(topic.encode(), b"", k.encode(), b"", body + b"%d" % i, 1)
                    for i, k in enumerate(keys))
    return store.put_batch(topic, 0, bytearray(data), len(keys))


def find(store, key, topic="T", begin=0, end=1 << 62, max_num=32):
    got = store.query_by_key(topic, key, begin, end, max_num, BIG, store.commitlog.max_offset)
    return [(m.physical_offset, m.keys) for m in decode_records(b"".join(got))]


@pytest.fixture
def store(tmp_path):
    s = MessageStore(cfg(tmp_path))
    s.start()
    yield s
    s.close()


def test_keys_found_newest_first_and_only_their_own(store):
    first = put(store, ["order-1 user-7", "order-2", "order-3 user-7"])
    second = put(store, ["user-7", "order-4"])
    assert [p for p, _ in find(store, "user-7")] == [second.physical_offsets[0],
                                                     first.physical_offsets[2],
                                                     first.physical_offsets[0]]
    assert find(store, "order-2") == [(first.physical_offsets[1], "order-2")]
    assert find(store, "order-9") == []
    assert find(store, "user-7", topic="U") == []        # keys are per topic
    assert len(find(store, "user-7", max_num=2)) == 2


def test_all_keys_in_one_slot_still_answer_exactly(tmp_path):
    s = MessageStore(cfg(tmp_path, index_slot_count=1))  # every key collides
    s.start()
    put(s, [f"k{i}" for i in range(30)])
    for i in (0, 17, 29):
        assert [k for _, k in find(s, f"k{i}")] == [f"k{i}"]
    s.close()


def test_time_range(store, monkeypatch):
    t0 = 1_700_000_000_000
    now = [t0]
    monkeypatch.setattr(time, "time_ns", lambda: now[0] * 1_000_000)
    early = put(store, ["k"]).physical_offsets[0]
    now[0] = t0 + 10_000
    late = put(store, ["k"]).physical_offsets[0]
    assert [p for p, _ in find(store, "k")] == [late, early]
    assert [p for p, _ in find(store, "k", begin=t0 + 5_000)] == [late]
    assert [p for p, _ in find(store, "k", end=t0 + 5_000)] == [early]
    assert find(store, "k", begin=t0 + 1, end=t0 + 9_999) == []


def test_rollover_to_new_files(store):
    offsets = []
    for _i in range(5):
        offsets += put(store, [f"k k{j}" for j in range(10)]).physical_offsets
    assert len(store.index.files) > 1                     # 100 entries, 40 per file
    found = [p for p, _ in find(store, "k", max_num=100)]
    assert found == offsets[::-1]
    assert [p for p, _ in find(store, "k3", max_num=100)] == offsets[3::10][::-1]


def test_restart_reindexes_past_the_checkpoint_without_duplicates(tmp_path):
    s = MessageStore(cfg(tmp_path))
    s.start()
    a = put(s, ["k a"]).physical_offsets
    s.checkpoint()
    b = put(s, ["k b"]).physical_offsets
    s.commitlog.flush()                # a crash: no checkpoint past `a`
    s.index.close()
    for cq in s.queues.values():
        cq.close()
    s.commitlog.close()
    again = MessageStore(cfg(tmp_path))
    again.start()
    assert [p for p, _ in find(again, "k")] == b + a
    assert again.index.entries == 4
    again.close()


def test_index_rebuilt_when_its_files_are_lost(tmp_path):
    s = MessageStore(cfg(tmp_path))
    s.start()
    a = put(s, ["k"]).physical_offsets
    s.commitlog.flush()
    s.index.close()
    for cq in s.queues.values():
        cq.close()
    s.commitlog.close()
    for name in os.listdir(tmp_path / "index"):
        os.unlink(tmp_path / "index" / name)
    os.unlink(tmp_path / "checkpoint")                    # recovery scans everything
    again = MessageStore(cfg(tmp_path))
    again.start()
    assert [p for p, _ in find(again, "k")] == a
    again.close()


def test_slave_dispatch_indexes_and_truncation_forgets(tmp_path):
    master, slave = MessageStore(cfg(tmp_path / "m")), MessageStore(cfg(tmp_path / "s"))
    master.start()
    slave.start()
    kept = put(master, ["k x"] * 3).physical_offsets
    cut = master.commitlog.max_offset
    put(master, ["k y"] * 45)                             # past one index file
    slave.append_raw(0, bytes(master.read_raw(0, 1 << 20)))
    slave.dispatch()
    assert [p for p, _ in find(slave, "k", max_num=100)] == \
        [p for p, _ in find(master, "k", max_num=100)]
    assert len(find(slave, "y", max_num=100)) == 45
    slave.truncate_to(cut)
    assert [p for p, _ in find(slave, "k", max_num=100)] == kept[::-1]
    assert find(slave, "y") == []
    assert slave.index.last_phys == kept[-1]
    # new records at the cut are indexed again
    again = put(slave, ["k z"]).physical_offsets
    assert [p for p, _ in find(slave, "k")] == again + kept[::-1]
    master.close()
    slave.close()


def test_retention_deletes_old_index_files(store):
    for _i in range(3):
        put(store, [f"k{j}" for j in range(40)])
    assert len(store.index.files) == 3
    assert store.index.delete_below(store.index.files[1].begin_phys) == 1
    assert len(store.index.files) == 2
    assert store.index.delete_below(BIG) == 1             # never the newest
    assert len(store.index.files) == 1


def test_index_file_truncate_repoints_slots(tmp_path):
    f = IndexFile(str(tmp_path / "f"), 4, 100)
    hs = [1, 5, 1, 2, 5, 1]
    f.add(hs, [100 * i for i in range(6)], [1000 + i for i in range(6)])
    assert list(f.chain(1, 0, BIG)) == [500, 200, 0] and list(f.chain(5, 0, BIG)) == [400, 100]
    assert f.truncate(250) == 3
    assert list(f.chain(1, 0, BIG)) == [200, 0] and list(f.chain(5, 0, BIG)) == [100]
    assert list(f.chain(2, 0, BIG)) == []
    f.add([2], [300], [2000])
    assert list(f.chain(2, 0, BIG)) == [300] and f.count == 4
    f.close()
    again = IndexFile(str(tmp_path / "f"), 4, 100)
    assert (again.count, again.begin_phys, again.end_phys) == (4, 0, 300)
    again.close()
    with pytest.raises(ValueError, match="index_slot_count"):
        IndexFile(str(tmp_path / "f"), 8, 100)


def test_key_hash_depends_on_topic():
    assert key_hash(b"T", b"k") != key_hash(b"U", b"k")
    idx_hash = key_hash(b"T", b"k")
    assert 0 <= idx_hash < 1 << 32
