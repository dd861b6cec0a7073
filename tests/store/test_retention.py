import os
from types import SimpleNamespace

from duomq.common.config import BrokerConfig
from duomq.format import record as rec
from duomq.store import MessageStore
from duomq.store.retention import deletable_prefix


def segs(*bases):
    return [SimpleNamespace(base=b, end=b + 100, mtime=m) for b, m in bases]


def test_deletable_prefix_rules():
    s = segs((0, 0), (100, 0), (200, 0), (300, 0))
    def mt(seg):
        return seg.mtime
    assert deletable_prefix(s, 10_000, 3600, None, mt) == 3          # never the active one
    assert deletable_prefix(s, 1000, 3600, None, mt) == 0            # too young
    assert deletable_prefix(s, 10_000, 3600, 150, mt) == 1           # a group needs 150+
    s[1].mtime = 9000
    assert deletable_prefix(s, 10_000, 3600, None, mt) == 1          # stops at the young one


def test_store_deletes_old_segments_and_moves_queue_minimum(tmp_path):
    cfg = BrokerConfig(data_dir=str(tmp_path), segment_size_bytes=4096, max_message_bytes=1024,
                       max_pull_bytes=4096, cq_entries_per_segment=8)
    s = MessageStore(cfg)
    s.start()
    for _i in range(40):
        s.put_batch("T", 0, bytearray(rec.encode_record(b"T", b"", b"", b"", b"x" * 300, 1)), 1)
    old = len(s.commitlog.mfq.segments)
    assert old > 3
    for seg in s.commitlog.mfq.segments[:-1]:
        os.utime(seg.path, (1, 1))
    assert s.delete_expired(72, None) == old - 1
    cq = s.find_queue("T", 0)
    assert cq.min_offset > 0
    assert s.commitlog.min_offset == s.commitlog.mfq.segments[0].base
    off, n = cq.min_offset, 0
    while (got := s.get_messages("T", 0, off, 100, 1 << 20, s.commitlog.max_offset)).count:
        off, n = got.next_offset, n + got.count
    assert n == cq.max_offset - cq.min_offset
    assert s.get_messages("T", 0, 0, 10, 1 << 20, s.commitlog.max_offset).status == "OFFSET_ILLEGAL"
