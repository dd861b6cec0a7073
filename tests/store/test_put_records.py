"""Records the broker writes again go in one put per run bound for one queue."""

from duomq.common.config import BrokerConfig
from duomq.common.message import decode_records
from duomq.format import record as rec
from duomq.store import MessageStore


def test_runs_bound_for_one_queue_are_stored_together_in_order(tmp_path):
    s = MessageStore(BrokerConfig(data_dir=str(tmp_path), segment_size_bytes=1 << 16,
                                  max_message_bytes=4096, max_pull_bytes=1 << 16))
    s.start()
    items = [(t, q, rec.encode_record(t.encode(), b"", b"", b"", b"%d" % i, 1))
             for i, (t, q) in enumerate([("A", 0), ("A", 0), ("B", 1), ("A", 0), ("A", 0)])]
    puts = s.put_records(items)
    assert [len(p.physical_offsets) for p in puts] == [2, 1, 2]
    assert [p.queue_offset for p in puts] == [0, 0, 2]
    offsets = [o for p in puts for o in p.physical_offsets]
    assert offsets == sorted(offsets) and puts[-1].end_offset == s.commitlog.max_offset
    got = s.get_messages("A", 0, 0, 10, 1 << 16, s.commitlog.max_offset)
    assert [m.body for m in decode_records(got.records)] == [b"0", b"1", b"3", b"4"]
    s.close()
