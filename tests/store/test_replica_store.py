"""A slave's store: the master's bytes appended at the same offsets, consume
queues rebuilt by dispatch, byte-identical logs."""

import threading

import pytest

from duomq.common.config import BrokerConfig
from duomq.format import record as rec
from duomq.store import MessageStore


def cfg(path):
    return BrokerConfig(data_dir=str(path), segment_size_bytes=4096, max_message_bytes=1024,
                        max_pull_bytes=4096, cq_entries_per_segment=16)


def fill(store, n):
    for i in range(n):
        body = b"msg-%04d" % i * (1 + i % 20)
        store.put_batch("T", i % 3, bytearray(rec.encode_record(b"T", b"tg" if i % 2 else b"",
                                                                b"", b"", body, 1)), 1)


def copy(master, slave, chunk):
    while slave.commitlog.max_offset < master.commitlog.max_offset:
        data = bytes(master.read_raw(slave.commitlog.max_offset, chunk))
        slave.append_raw(slave.commitlog.max_offset, data)
        slave.dispatch()


@pytest.mark.parametrize("chunk", [7, 100, 1000, 1 << 20])
def test_replica_is_byte_identical_and_serves_the_same_queues(tmp_path, chunk):
    master, slave = MessageStore(cfg(tmp_path / "m")), MessageStore(cfg(tmp_path / "s"))
    master.start()
    slave.start()
    fill(master, 120)
    copy(master, slave, chunk)
    assert slave.commitlog.max_offset == master.commitlog.max_offset
    assert slave.dispatched_offset == master.commitlog.max_offset
    for m_seg, s_seg in zip(master.commitlog.mfq.segments, slave.commitlog.mfq.segments, strict=True):
        assert m_seg.base == s_seg.base and bytes(m_seg.mm[:m_seg.wrote]) == bytes(s_seg.mm[:s_seg.wrote])
    for key, mcq in master.queues.items():
        scq = slave.queues[key]
        assert (scq.min_offset, scq.max_offset) == (mcq.min_offset, mcq.max_offset)
        assert bytes(scq.read(0, 100)) == bytes(mcq.read(0, 100))


def test_append_raw_refuses_a_gap(tmp_path):
    slave = MessageStore(cfg(tmp_path))
    slave.start()
    with pytest.raises(ValueError, match="ends at 0"):
        slave.append_raw(100, b"x" * 10)


def test_replica_recovers_like_any_store(tmp_path):
    master, slave = MessageStore(cfg(tmp_path / "m")), MessageStore(cfg(tmp_path / "s"))
    master.start()
    slave.start()
    fill(master, 50)
    copy(master, slave, 333)
    slave.commitlog.flush()
    again = MessageStore(cfg(tmp_path / "s"))
    again.start()
    assert again.commitlog.max_offset == master.commitlog.max_offset
    assert {k: q.max_offset for k, q in again.queues.items()} == \
        {k: q.max_offset for k, q in master.queues.items()}


def test_truncate_to_cuts_log_and_queues_and_survives_restart(tmp_path):
    s = MessageStore(cfg(tmp_path))
    s.start()
    fill(s, 60)
    cut = s.physical_at("T", 0, 10)        # record 30 (queue 0 holds every third)
    removed_bytes, removed_records = s.truncate_to(cut)
    assert removed_bytes > 0 and removed_records == 30
    assert s.commitlog.max_offset == cut
    assert {k[1]: q.max_offset for k, q in s.queues.items()} == {0: 10, 1: 10, 2: 10}
    fill(s, 3)                              # appends continue at the cut
    s.close()
    again = MessageStore(cfg(tmp_path))
    again.start()
    assert {k[1]: q.max_offset for k, q in again.queues.items()} == {0: 11, 1: 11, 2: 11}


def test_a_cut_waits_for_the_checkpoint_being_written_and_is_not_undone_by_it(tmp_path):
    """The checkpoint thread reads the offset to record, then the serving
    thread cuts the log (a slave following a new epoch): the checkpoint
    written after the cut must not be the offset read before it, and the two
    writers must not race on one temporary file (a drill's slave died of
    FileNotFoundError on checkpoint.tmp)."""
    s = MessageStore(cfg(tmp_path))
    s.start()
    fill(s, 60)
    s.commitlog.mfq.flush()
    cut = s.physical_at("T", 0, 10)
    inside, release, done = threading.Event(), threading.Event(), threading.Event()
    write = s.checkpoint_file.write

    def slow_write(offset):          # the checkpoint thread, between reading and writing
        if threading.current_thread().name == "checkpoint":
            inside.set()
            release.wait(5)
        write(offset)

    s.checkpoint_file.write = slow_write
    s._checkpointed = -1
    ckpt = threading.Thread(target=s.checkpoint, name="checkpoint")
    ckpt.start()
    assert inside.wait(5)
    cutter = threading.Thread(target=lambda: (s.adopt(), s.truncate_to(cut), done.set()))
    cutter.start()
    assert not done.wait(0.3), "the cut did not wait for the checkpoint being written"
    release.set()
    ckpt.join(5)
    cutter.join(5)
    assert done.is_set()
    assert s.checkpoint_file.read() <= cut
    s.close()


def master_log(tmp_path, n):
    """A started (master, slave) pair, the master's log after ``n`` records,
    and where its second record starts."""
    master, slave = MessageStore(cfg(tmp_path / "m")), MessageStore(cfg(tmp_path / "s"))
    master.start()
    slave.start()
    fill(master, n)
    data = bytearray(master.read_raw(0, 1 << 20))
    return master, slave, data, rec.SIZE_MAGIC.unpack_from(data, 0)[0]


def test_dispatch_refuses_a_damaged_record(tmp_path):
    master, slave, data, second = master_log(tmp_path, 3)
    third = second + rec.SIZE_MAGIC.unpack_from(data, second)[0]
    data[third - 1] ^= 0xFF                           # the second record's body: CRC mismatch
    slave.append_raw(0, bytes(data))
    with pytest.raises(rec.RecordError, match=f"damaged replicated record at {second}"):
        slave.dispatch()
    assert slave.dispatched_offset == 0               # the call dispatched nothing


@pytest.mark.parametrize("n", [5, 300])     # checked record by record, and by numpy
def test_dispatch_refuses_a_record_whose_header_was_changed(tmp_path, n, hot_loops):
    big = dict(segment_size_bytes=1 << 20, cq_entries_per_segment=1000)
    master = MessageStore(cfg(tmp_path / "m").replace(**big))
    slave = MessageStore(cfg(tmp_path / "s").replace(**big))
    master.start()
    slave.start()
    fill(master, n)
    data = bytearray(master.read_raw(0, 1 << 20))
    pos, k = 0, 0
    while k < n - 3:                                  # the fourth record from the end
        pos += rec.SIZE_MAGIC.unpack_from(data, pos)[0]
        k += 1
    data[pos + rec.OFFSET["store_ts_ms"] + 7] ^= 0x01   # a header byte the payload CRC misses
    slave.append_raw(0, bytes(data))
    with pytest.raises(rec.RecordError, match=f"damaged replicated record at {pos}$"):
        slave.dispatch()
    assert slave.dispatched_offset == 0


def test_dispatch_names_a_record_of_format_1(tmp_path):
    """A master of an older duomq replicating format-1 records: named, not 'damaged'."""
    master, slave, data, second = master_log(tmp_path, 2)
    rec.SIZE_MAGIC.pack_into(data, second, rec.SIZE_MAGIC.unpack_from(data, second)[0],
                             rec.RECORD_MAGIC_V1)
    slave.append_raw(0, bytes(data))
    with pytest.raises(rec.OldFormatError, match=f"{second} is in record format 1: the master"):
        slave.dispatch()
    for s in (master, slave):
        s.close()


def test_bulk_dispatch_builds_what_the_record_by_record_loop_builds(tmp_path, monkeypatch, hot_loops):
    """store/bulk_dispatch.py: the same consume-queue entries and key index
    for a log of mixed records (queues, tags, keys, properties, batches)."""
    from duomq.store import bulk_dispatch
    big = dict(segment_size_bytes=1 << 20, cq_entries_per_segment=1000)
    master = MessageStore(cfg(tmp_path / "m").replace(**big))
    master.start()
    for i in range(600):
        n = 1 + i % 7                                  # batches of 1..7 records per queue
        topic = b"T" if i % 10 else b"U"
        rec_ = rec.encode_record(topic, b"tg%d" % (i % 3) if i % 4 else b"",
                                 b"k%d" % i if i % 5 == 0 else b"",
                                 rec.encode_properties({"p": "v"}) if i % 6 == 0 else b"",
                                 b"body-%d" % i * (1 + i % 9), 1)
        master.put_batch(topic.decode(), i % 3, bytearray(rec_ * n), n)

    def replica(name, bulk_min):
        monkeypatch.setattr(bulk_dispatch, "BULK_MIN", bulk_min)
        s = MessageStore(cfg(tmp_path / name).replace(**big))
        s.start()
        copy(master, s, 1 << 20)
        return s
    slow, bulk = replica("slow", 10 ** 9), replica("bulk", 64)
    assert bulk.messages_stored == slow.messages_stored == master.messages_stored
    for key, cq in slow.queues.items():
        other = bulk.queues[key]
        assert (cq.min_offset, cq.max_offset) == (other.min_offset, other.max_offset)
        assert [cq.entry(i) for i in range(cq.max_offset)] == \
               [other.entry(i) for i in range(other.max_offset)]
    assert bulk.index.entries == slow.index.entries > 0
    for i in range(0, 600, 5):
        topic = b"T" if i % 10 else b"U"
        found = list(bulk.index.candidates(topic, b"k%d" % i, 0, 1 << 62))
        assert found and found == list(slow.index.candidates(topic, b"k%d" % i, 0, 1 << 62))


@pytest.mark.parametrize("damage", [None, "magic", "size"])
def test_find_run_strides_over_equal_sizes_and_stops_where_the_plain_walk_stops(damage):
    import random

    from duomq.store import bulk_dispatch
    rnd = random.Random(7)
    buf, starts = bytearray(), []
    for _ in range(2000):       # runs of one size, broken by others
        starts.append(len(buf))
        buf += rec.encode_record(b"T", b"", b"", b"", b"x" * rnd.choice([100] * 8 + [7, 300]), 1)
    written = len(buf)
    if damage:                  # a record in the middle of a long equal run
        at = next(s for i, s in enumerate(starts) if i > 1000
                  and starts[i + 1] - s == starts[i] - starts[i - 1] == starts[i + 2] - starts[i + 1])
        offset = 4 if damage == "magic" else 0
        buf[at + offset] ^= 0x40
        starts = starts[:starts.index(at)]
        written_to = at
    else:
        written_to = written
    buf += bytes(300)                               # room left in the segment
    got, end = bulk_dispatch.find_run(memoryview(buf), 0, written, len(buf))
    assert got == starts and end == written_to
