"""Batches of every size across many small commit-log and consume-queue
segments: each record is where its answer says, each queue entry points at
it, and a reopened store reads the same. The write path has a shortcut for
a batch that fits the open segments; this walks both sides of every edge."""

import random

from duomq.common.config import BrokerConfig
from duomq.common.message import decode_records
from duomq.format import record as rec
from duomq.store import MessageStore


def _store(path) -> MessageStore:
    s = MessageStore(BrokerConfig(data_dir=str(path), segment_size_bytes=4096,
                                  cq_entries_per_segment=7, max_message_bytes=1024,
                                  max_pull_bytes=1 << 20))
    s.start()
    return s


def test_batches_across_segment_edges_land_where_their_answers_say(tmp_path):
    rnd = random.Random(41)
    s = _store(tmp_path)
    sent: dict[int, list[bytes]] = {0: [], 1: []}
    for n in range(300):
        qid = rnd.randrange(2)
        bodies = [b"%d-%d:" % (n, i) + b"x" * rnd.randrange(0, 700)
                  for i in range(rnd.choice((1, 1, 2, 3, 5)))]
        data = b"".join(rec.encode_record(b"T", b"tag" if i % 2 else b"", b"", b"", body, 1)
                        for i, body in enumerate(bodies))
        put = s.put_batch("T", qid, bytearray(data), len(bodies))
        assert put.queue_offset == len(sent[qid])
        for off, body in zip(put.physical_offsets, bodies, strict=True):
            size = rec.HEADER_SIZE + 1 + (3 if bodies.index(body) % 2 else 0) + len(body)
            assert off // 4096 == (off + size - 1) // 4096      # never across two segments
            view = s.read_record(off, s.commitlog.max_offset)
            assert bytes(view[-len(body):]) == body
        sent[qid].extend(bodies)
        assert put.end_offset == s.commitlog.max_offset
    assert len(s.commitlog.mfq.segments) > 20
    assert all(len(s.find_queue("T", q).mfq.segments) > 10 for q in (0, 1))

    def read_all(store: MessageStore, qid: int) -> list[bytes]:
        out, offset = [], 0
        while True:          # a read stops at a consume-queue segment's end
            got = store.get_messages("T", qid, offset, 10_000, 1 << 20,
                                     store.commitlog.max_offset)
            if not got.count:
                return out
            out += [m.body for m in decode_records(got.records)]
            offset = got.next_offset
    for qid in (0, 1):
        assert read_all(s, qid) == sent[qid]
    s.close()
    again = _store(tmp_path)
    for qid in (0, 1):
        assert read_all(again, qid) == sent[qid]
    again.close()


def test_a_segment_killed_before_its_preallocation_is_dropped_at_load(tmp_path):
    """kill -9 between creating a segment file and preallocating it leaves
    it empty (chaos_tests/test_kill9_sync_flush caught a consume queue so):
    nothing was ever written to it, so the next start drops it instead of
    refusing to start; a segment of another wrong size is still refused."""
    import pytest

    from duomq.store.mapped_file_queue import MappedFileQueue, segment_name
    q = MappedFileQueue(str(tmp_path), 4096)
    q.create(0)
    q.create(4096)
    for seg in q.segments:
        seg.close()
    open(tmp_path / segment_name(8192), "wb").close()      # the crash's leftover
    q2 = MappedFileQueue(str(tmp_path), 4096)
    q2.load()
    assert [s.base for s in q2.segments] == [0, 4096]
    assert not (tmp_path / segment_name(8192)).exists()
    for seg in q2.segments:
        seg.close()
    with open(tmp_path / segment_name(8192), "wb") as f:
        f.write(b"x")                                       # not empty: real damage
    with pytest.raises(ValueError, match="has size 1"):
        MappedFileQueue(str(tmp_path), 4096).load()


def test_a_write_the_kernel_takes_in_pieces_is_written_whole(tmp_path, monkeypatch):
    """pwrite may take fewer bytes than offered (a signal, a nearly full
    disk): ``pwrite_all`` writes the rest after the first call, at the right
    places, whatever size the pieces are (its first call is the common
    case's only one)."""
    import os as real_os

    from duomq.store import segment
    pwrite = real_os.pwrite
    data = bytes(range(256)) * 40
    for most in (1, 7, 4095, len(data) - 1):
        calls = []

        def short(fd, buf, pos, most=most, calls=calls):
            calls.append(pos)
            return pwrite(fd, bytes(buf)[:most], pos)

        path = tmp_path / f"piece-{most}"
        fd = real_os.open(path, real_os.O_RDWR | real_os.O_CREAT)
        try:
            monkeypatch.setattr(segment.os, "pwrite", short)
            segment.pwrite_all(fd, data, 100)
            monkeypatch.undo()
            assert real_os.pread(fd, len(data) + 200, 0) == bytes(100) + data
            assert calls[:2] == [100, 100 + most] and len(calls) == -(-len(data) // most)
        finally:
            real_os.close(fd)
