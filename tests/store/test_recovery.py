import os
import pathlib

import pytest

from duomq.common.config import BrokerConfig
from duomq.common.errors import UnsupportedVersionError
from duomq.common.idempotence import sequencing
from duomq.common.message import decode_records
from duomq.format import record as rec
from duomq.store import MessageStore


@pytest.fixture
def cfg(tmp_path):
    return BrokerConfig(data_dir=str(tmp_path), segment_size_bytes=8192, max_message_bytes=2048,
                        max_pull_bytes=8192, cq_entries_per_segment=16)


def put(store, n, start=0, queue=0):
    buf = bytearray(b"".join(rec.encode_record(b"T", b"", b"", b"", b"m%05d" % (start + i) * 8, 1)
                             for i in range(n)))
    return store.put_batch("T", queue, buf, n)


def read_all(store, queue=0):
    out, off = [], 0
    while True:
        got = store.get_messages("T", queue, off, 1000, 1 << 20, store.commitlog.max_offset)
        if not got.count:
            return out
        out += decode_records(got.records)
        off = got.next_offset


def test_restart_after_clean_close_keeps_everything(cfg):
    s = MessageStore(cfg)
    s.start()
    for i in range(30):
        put(s, 5, i * 5, queue=i % 2)
    s.close()
    s2 = MessageStore(cfg)
    report = s2.start()
    assert not report.truncated and report.records_scanned == 0
    assert [m.queue_offset for m in read_all(s2, 0)] == list(range(75))
    assert s2.find_queue("T", 1).max_offset == 75


def test_crash_rebuilds_consume_queues_past_checkpoint(cfg):
    s = MessageStore(cfg)
    s.start()                      # checkpoint at 0
    put(s, 40)
    s.commitlog.flush()            # the commit log is on disk, the queue files are not
    for cq in s.queues.values():   # simulate lost consume-queue pages
        for seg in cq.mfq.segments:
            seg.zero_from(0)
    s2 = MessageStore(cfg)
    report = s2.start()
    assert report.records_scanned == 40 and not report.truncated
    assert [m.body[:6] for m in read_all(s2)] == [b"m%05d" % i for i in range(40)]


def test_crash_truncates_at_first_damaged_record(cfg):
    s = MessageStore(cfg)
    s.start()
    put(s, 50)
    s.commitlog.flush()
    phys = s.physical_at("T", 0, 30)
    seg = s.commitlog.mfq.find(phys)
    os.pwrite(seg.fd, b"\xff\xff", phys - seg.base + rec.HEADER_SIZE + 4)  # inside the body
    s2 = MessageStore(cfg)
    report = s2.start()
    assert report.truncated and "CRC" in report.reason
    assert report.end_offset == phys
    msgs = read_all(s2)
    assert [m.queue_offset for m in msgs] == list(range(30))
    # appends continue at the truncation point with the next queue offset
    assert put(s2, 1, 30).queue_offset == 30
    assert s2.commitlog.max_offset > phys


def test_torn_tail_is_truncated_and_zeroed(cfg):
    s = MessageStore(cfg)
    s.start()
    put(s, 10)
    end = s.commitlog.max_offset
    seg = s.commitlog.mfq.last()
    # a partial record: header written, body missing
    partial = rec.encode_record(b"T", b"", b"", b"", b"x" * 100, 1, queue_offset=10,
                                physical_offset=end)[:90]
    os.pwrite(seg.fd, partial, end - seg.base)
    s2 = MessageStore(cfg)
    report = s2.start()
    assert report.end_offset == end and report.truncated
    assert bytes(s2.commitlog.mfq.last().mm[end - seg.base:end - seg.base + 90]) == b"\0" * 90


def test_damaged_checkpoint_means_full_scan(cfg):
    s = MessageStore(cfg)
    s.start()
    put(s, 20)
    s.close()
    with open(s.checkpoint_file.path, "r+b") as f:
        f.write(b"\x01")
    s2 = MessageStore(cfg)
    report = s2.start()
    assert report.start_offset == 0 and report.records_scanned == 20



def rewrite_as_format_1(path: str, pos: int) -> None:
    """Give the record at ``pos`` the magic of record format 1 (CRC-32 bodies)."""
    with open(path, "r+b") as f:
        f.seek(pos)
        size = int.from_bytes(f.read(4), "big")
        f.seek(pos + 4)
        f.write(rec.LEAD.pack(size, rec.RECORD_MAGIC_V1, 0)[4:8])


@pytest.mark.parametrize("which", ["first", "past the checkpoint"])
def test_a_log_in_record_format_1_is_refused_and_left_untouched(cfg, which):
    s = MessageStore(cfg)
    s.start()
    second = put(s, 10).physical_offsets[1]
    seg = s.commitlog.mfq.segments[0].path
    s.close()
    if which == "first":      # refused up front, by the first record
        rewrite_as_format_1(seg, 0)
    else:                     # met by recovery: a checkpoint-less scan
        rewrite_as_format_1(seg, second)
        os.unlink(s.checkpoint_file.path)
    before = pathlib.Path(seg).read_bytes()
    with pytest.raises((UnsupportedVersionError, rec.OldFormatError), match="format.1"):
        MessageStore(cfg).start()
    assert pathlib.Path(seg).read_bytes() == before


def flip(path: str, pos: int, value: bytes) -> bytes:
    with open(path, "r+b") as f:
        f.seek(pos)
        old = f.read(len(value))
        f.seek(pos)
        f.write(value)
    return old


def crashed_store(cfg, n=50):
    """A store holding ``n`` flushed records of queue 0, abandoned without a close."""
    s = MessageStore(cfg)
    s.start()
    put(s, n)
    s.commitlog.flush()
    s.checkpoint_file.write(0)            # as if the crash came before any checkpoint
    return s


@pytest.mark.parametrize("field,at,value", [
    ("queue id", 12 + 3, b"\x05"), ("queue offset", 16 + 7, b"\x63"),
    ("topic name", rec.HEADER_SIZE, b"\xff")])
def test_damage_below_later_records_is_quarantined_never_silently_cut(cfg, field, at, value):
    s = crashed_store(cfg)
    phys = s.physical_at("T", 0, 20)
    seg = s.commitlog.mfq.find(phys)
    tail_before = bytes(seg.mm[phys - seg.base:])
    later = [x for x in s.commitlog.mfq.segments if x.base > seg.base]
    later_before = {os.path.basename(x.path): bytes(x.mm[:]) for x in later}
    flip(seg.path, phys - seg.base + at, value)
    s2 = MessageStore(cfg)
    report = s2.start()                   # starts: a bad topic byte no longer stops it
    assert report.damaged and report.end_offset == phys and "CRC" in report.reason
    assert report.damaged_until > phys and report.cut_bytes == report.damaged_until - phys
    q = pathlib.Path(report.quarantine)
    assert q.parent == pathlib.Path(cfg.data_dir) / "quarantine"
    kept = (q / os.path.basename(seg.path)).read_bytes()
    assert len(kept) == len(tail_before) and kept[at + 1:] == tail_before[at + 1:]
    for name, data in later_before.items():
        assert (q / name).read_bytes() == data
    assert "is at" in (q / "REPORT.txt").read_text()
    assert "DAMAGE below data written later" in str(report)
    assert [m.queue_offset for m in read_all(s2)] == list(range(20))


def test_a_torn_tail_is_cut_and_said_so(cfg):
    s = crashed_store(cfg, 10)
    last = s.physical_at("T", 0, 9)
    end = s.commitlog.max_offset
    seg = s.commitlog.mfq.find(last)
    flip(seg.path, last - seg.base + rec.HEADER_SIZE + 2, b"\x00\x00")   # the last write, torn
    report = MessageStore(cfg).start()
    assert report.truncated and not report.damaged and report.end_offset == last
    assert report.cut_bytes == end - last and "a torn tail of" in str(report)


def test_a_checkpoint_inside_a_record_is_not_taken_for_the_end(cfg):
    s = MessageStore(cfg)
    s.start()
    put(s, 40)
    tenth, end = s.physical_at("T", 0, 10), s.commitlog.max_offset
    s.close()
    s.checkpoint_file.write(tenth + 30)               # a valid CRC, the wrong place
    s2 = MessageStore(cfg)
    report = s2.start()
    assert not report.truncated and s2.commitlog.max_offset == end
    assert report.start_offset == tenth
    assert [m.queue_offset for m in read_all(s2)] == list(range(40))


def test_an_overwritten_consume_queue_entry_is_repaired_not_a_stuck_consumer(cfg):
    s = MessageStore(cfg)
    s.start()
    for i in range(6):
        put(s, 5, i * 5)                               # six batches: runs of five records
    cq = s.find_queue("T", 0)
    right = cq.entry(12)
    cq.put_entry(12, right[0] + 7, right[1], 0)        # garbage offset, as a bad disk would
    end = s.commitlog.max_offset
    got = s.get_messages("T", 0, 10, 100, 1 << 20, end)
    assert got.count == 2 and got.next_offset == 12    # served up to the bad entry
    got = s.get_messages("T", 0, 12, 100, 1 << 20, end)
    assert got.count == 0 and got.next_offset == 12    # the entry was repaired ...
    assert cq.entry(12) == right
    assert [m.queue_offset for m in read_all(s)] == list(range(30))   # ... nothing is lost
    cq.put_entry(13, 1, 1, 0)                          # a size that cannot be a record
    cq.put_entry(14, 1, 1, 0)                          # and its neighbour: no way to repair
    got = s.get_messages("T", 0, 13, 100, 1 << 20, end)
    assert got.count == 0 and got.next_offset == 14    # skipped, logged: never stuck
    s.close()


def test_a_checkpoint_at_a_segment_start_is_taken_as_it_is(cfg):
    s = MessageStore(cfg)
    s.start()
    while len(s.commitlog.mfq.segments) < 2:
        put(s, 5)
    base = s.commitlog.mfq.segments[1].base
    s.close()
    s.checkpoint_file.write(base)                     # after a segment's filler
    report = MessageStore(cfg).start()
    assert report.start_offset == base and not report.truncated


def test_a_queue_written_a_little_is_flushed_later_and_holds_the_checkpoint(cfg, monkeypatch):
    import dataclasses
    s = MessageStore(dataclasses.replace(cfg, cq_flush_least_pages=1))   # 4 KiB: 204 entries
    s.start()
    synced = []
    monkeypatch.setattr(os, "fdatasync", lambda fd: synced.append(fd))
    put(s, 250, queue=0)                             # 5,000 bytes of entries: flushed
    first = put(s, 3, queue=1).physical_offsets[0]   # 60 bytes: left for later
    put(s, 250, queue=0)
    s.commitlog.flush()
    q0, q1 = s.queues[("T", 0)], s.queues[("T", 1)]
    synced.clear()
    offset = s.checkpoint(thorough=False)
    assert offset == first                           # recovery replays queue 1's entries
    assert q0.mfq.segments[-1].fd in synced and q0.unflushed == 0
    assert q1.unflushed == 60 and all(seg.fd not in synced for seg in q1.mfq.segments)
    assert s.checkpoint_file.read() == first
    assert s.checkpoint(thorough=True) == s.dispatched_offset and q1.unflushed == 0
    # a crash now keeps everything: the consume queues are rebuilt from the checkpoint
    monkeypatch.undo()
    s.close()
    s = MessageStore(cfg)
    s.start()
    assert [m.body[:6] for m in read_all(s, 1)] == [b"m%05d" % i for i in range(3)]
    assert len(read_all(s, 0)) == 500
    s.close()


def test_entries_written_while_a_queue_is_flushed_stay_unflushed(cfg):
    s = MessageStore(cfg)
    s.start()
    put(s, 5)
    cq = s.queues[("T", 0)]
    real = cq.mfq.flush

    def slow_flush():                               # the serving thread writes meanwhile
        put(s, 2, start=5)
        return real()
    cq.mfq.flush = slow_flush
    mark = s.dispatched_offset
    cq.flush(mark)
    assert cq.unflushed == 40 and cq.dirty_since == mark
    s.close()


def put_numbered(store, pid, seq, n=3):
    """An idempotent producer's batch: its first record flagged and numbered."""
    first = rec.encode_record(b"T", b"", b"", rec.encode_properties(sequencing(pid, seq, n)),
                              b"first", 1, flags=rec.FLAG_SEQUENCED)
    rest = b"".join(rec.encode_record(b"T", b"", b"", b"", b"m%05d" % i, 1) for i in range(n - 1))
    return store.put_batch("T", 0, bytearray(first + rest), n, (pid, seq, n))


def test_a_clean_close_snapshots_the_producers_so_nothing_is_replayed(cfg):
    s = MessageStore(cfg)
    s.start()
    put_numbered(s, 7, 0)
    s.commitlog.flush()
    s.checkpoint()                 # the periodic snapshot: the sequences up to here
    for seq in range(1, 20):       # more batches within PRODUCER_SNAPSHOT_S: not snapshotted
        put_numbered(s, 7, seq)
        s.commitlog.flush()
        s.checkpoint()
    s.close()
    s2 = MessageStore(cfg)
    report = s2.start()
    assert report.records_scanned == 0          # a stale snapshot would replay 19 batches
    assert s2.producers.lookup(7, "T", 0, 19) is not None
    assert s2.producers.lookup(7, "T", 0, 20) is None


def test_recovery_leaves_nothing_it_scanned_mapped(tmp_path):
    """Recovery reads the log through the mapping; pages a process has mapped
    survive posix_fadvise(DONTNEED), so a restarted master would keep its
    replayed backlog warm and never send a catch-up reader to its slave (the
    demo's first-run failure). After a start that scanned every record, the
    scanned range can be made cold."""
    from duomq.store.residency import resident_fraction
    cfg = BrokerConfig(data_dir=str(tmp_path), segment_size_bytes=4 << 20,
                       max_message_bytes=2048, max_pull_bytes=8192)
    s = MessageStore(cfg)
    s.start()
    for i in range(40):
        put(s, 100, i * 100)       # 4,000 records, ~1 MiB
    s.commitlog.flush()
    for cq in s.queues.values():   # lost consume-queue pages: recovery scans everything
        for seg in cq.mfq.segments:
            seg.zero_from(0)
    s2 = MessageStore(cfg)
    assert s2.start().records_scanned == 4000
    end = s2.commitlog.max_offset
    seg = s2.commitlog.mfq.segments[0]
    os.posix_fadvise(seg.fd, 0, 0, os.POSIX_FADV_DONTNEED)
    assert resident_fraction(seg.fd, 0, end) < 0.1
    assert [m.body[:6] for m in read_all(s2)][-1] == b"m03999"   # still readable
    s2.close()
