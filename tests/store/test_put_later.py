"""A send's write in two halves (issue 41): ``put_batch(later=True)`` puts
the records in the commit log and returns; ``finish`` (which the serving
loop calls after the ack, before it serves anything else) writes the queue
entries and does the bookkeeping. Done so, the store must end up exactly
as a write done at once leaves it (every file byte for byte, every offset,
every key, every producer's sequence); before ``finish`` only the log has
the batch; any later write, and closing the store, finishes it first."""

import os
import random

import pytest

from duomq.common.config import BrokerConfig
from duomq.common.idempotence import sequencing
from duomq.format import record as rec
from duomq.store import MessageStore
from duomq.store import writes as store_writes


class FixedClock:
    """The store stamps records with the time: both stores get the same."""

    @staticmethod
    def time_ns() -> int:
        return 1_700_000_000_123_000_000


def open_store(path) -> MessageStore:
    s = MessageStore(BrokerConfig(data_dir=str(path), segment_size_bytes=4096,
                                  cq_entries_per_segment=7, max_message_bytes=1024,
                                  max_pull_bytes=1 << 20))
    s.start()
    return s


def batch(rnd: random.Random, n: int, pid: int | None, seq: int):
    """A batch of 1..4 records (keyed or not); its first flagged and numbered
    when ``pid`` is given."""
    k = rnd.choice((1, 1, 2, 4))
    out = []
    for i in range(k):
        props, flags = b"", 0
        if i == 0 and pid is not None:
            props, flags = rec.encode_properties(sequencing(pid, seq, k)), rec.FLAG_SEQUENCED
        out.append(rec.encode_record(b"T", b"tag", rnd.choice((b"", b"key-%d" % n)), props,
                                     b"%d-%d:" % (n, i) + b"x" * rnd.randrange(0, 500), 1,
                                     rec.NO_HOST, flags))
    numbering = (pid, seq, k) if pid is not None else None
    return b"".join(out), k, numbering


def files(root: str) -> dict[str, bytes]:
    got = {}
    for d, _dirs, names in os.walk(root):
        for name in names:
            if "checkpoint" in name or name.endswith(".json"):
                continue
            with open(os.path.join(d, name), "rb") as f:
                got[os.path.relpath(os.path.join(d, name), root)] = f.read()
    return got


def test_a_write_finished_later_leaves_the_store_as_one_done_at_once(tmp_path, monkeypatch):
    monkeypatch.setattr(store_writes, "time", FixedClock)
    at_once, later = open_store(tmp_path / "a"), open_store(tmp_path / "b")
    rnd = random.Random(41)
    seqs: dict[int, int] = {}
    try:
        for n in range(300):                  # past several segment rolls (4 KiB segments)
            pid = rnd.choice((None, 1, 2))
            seq = seqs[pid] = seqs.get(pid, -1) + 1
            data, k, numbering = batch(rnd, n, pid, seq)
            qid = rnd.randrange(3)
            a = at_once.put_batch("T", qid, bytearray(data), k, numbering)
            b = later.put_batch("T", qid, bytearray(data), k, numbering, later=True)
            assert (a.queue_offset, a.physical_offsets, a.end_offset) == \
                (b.queue_offset, b.physical_offsets, b.end_offset)
            rest = b.rest
            if rest is not None and rnd.random() < 0.7:   # else the next write finishes it
                rest.finish()
            if rest is None or rest.done:
                assert later.dispatched_offset == at_once.dispatched_offset
                assert later.messages_stored == at_once.messages_stored
                f, g = at_once.fresh, later.fresh
                assert (f.topic, f.queue_id, f.queue_offset, f.count, bytes(f.records), f.end) == \
                    (g.topic, g.queue_id, g.queue_offset, g.count, bytes(g.records), g.end)
        if rest is not None:
            rest.finish()
        for pid, top in seqs.items():
            if pid is None:
                continue
            for qid in range(3):
                for seq in range(top + 1):
                    assert later.producers.lookup(pid, "T", qid, seq) == \
                        at_once.producers.lookup(pid, "T", qid, seq)
        hits = 0
        for n in range(0, 300, 7):
            found = [[bytes(r) for r in st.query_by_key("T", f"key-{n}", 0, 2 ** 62, 10,
                                                          1 << 20, st.dispatched_offset)]
                     for st in (later, at_once)]
            assert found[0] == found[1]
            hits += len(found[0])
        assert hits > 10
        for qid in range(3):
            assert later.find_queue("T", qid).max_offset == at_once.find_queue("T", qid).max_offset
    finally:
        at_once.close()
        later.close()
    assert files(str(tmp_path / "b")) == files(str(tmp_path / "a"))


def test_before_finish_only_the_log_has_the_batch(tmp_path, c_loops):
    s = open_store(tmp_path)
    try:
        s.put_batch("Other", 0, bytearray(rec.encode_record(b"Other", b"", b"", b"", b"o", 1)),
                    1)                            # the log's first segment made
        before = s.dispatched_offset
        data, k, numbering = batch(random.Random(1), 0, 9, 0)
        first = s.put_batch("T", 0, bytearray(data), k, numbering, later=True)
        assert first.rest is not None and not first.rest.done
        assert s.commitlog.max_offset == first.end_offset
        assert s.dispatched_offset == before and s.messages_stored == 1
        cq = s.find_queue("T", 0)
        assert cq.max_offset == 0 and cq.entry(0) is None
        assert s.producers.lookup(9, "T", 0, 0) is None
        # another write finishes the first before it reads the queue's end
        again, k2, _ = batch(random.Random(2), 1, None, 0)
        second = s.put_batch("T", 0, bytearray(again), k2)
        assert second.queue_offset == k
        assert cq.max_offset == k + k2 and first.rest.done
        assert s.producers.lookup(9, "T", 0, 0).queue_offset == 0
        assert s.dispatched_offset == second.end_offset
    finally:
        s.close()


def test_closing_the_store_finishes_a_write_left_for_later(tmp_path, c_loops):
    s = open_store(tmp_path)
    s.put_batch("Other", 0, bytearray(rec.encode_record(b"Other", b"", b"", b"", b"o", 1)), 1)
    data, k, numbering = batch(random.Random(3), 0, 4, 0)
    put = s.put_batch("T", 1, bytearray(data), k, numbering, later=True)
    assert put.rest is not None and not put.rest.done
    s.close()
    s = open_store(tmp_path)
    try:
        cq = s.find_queue("T", 1)
        assert cq is not None and cq.max_offset == k
        assert cq.entry(0)[0] == put.physical_offsets[0]
        assert s.producers.lookup(4, "T", 1, 0).phys == put.physical_offsets[0]
    finally:
        s.close()


@pytest.mark.parametrize("later", [False, True])
def test_a_refused_batch_leaves_nothing_owed(tmp_path, later):
    s = open_store(tmp_path)
    try:
        with pytest.raises(rec.RecordError):
            s.put_batch("T", 0, bytearray(b"\x00" * 40), 1, later=later)
        assert s.commitlog.max_offset == 0
        # the next write finds nothing of it to finish first
        good = s.put_batch("T", 0, bytearray(rec.encode_record(b"T", b"", b"", b"", b"g", 1)), 1)
        assert good.queue_offset == 0 and s.find_queue("T", 0).max_offset == 1
    finally:
        s.close()


def test_a_second_half_that_fails_is_rebuilt_from_the_log_at_the_next_start(tmp_path, c_loops):
    """The queue entries of an acked send that cannot be written (an I/O
    error after the ack) raise out of its ``finish``, which stops the broker;
    closing still works, and the next start rebuilds them from the log."""
    s = open_store(tmp_path)
    s.put_batch("Other", 0, bytearray(rec.encode_record(b"Other", b"", b"", b"", b"o", 1)), 1)
    data, k, numbering = batch(random.Random(5), 0, 6, 0)
    put = s.put_batch("T", 2, bytearray(data), k, numbering, later=True)
    cq = s.find_queue("T", 2)

    def fails(*_args):
        raise OSError(5, "Input/output error")

    cq.append = fails
    assert put.rest is not None
    with pytest.raises(OSError):
        put.rest.finish()
    assert put.rest.done                   # not written twice (the close below)
    del cq.append
    s.close()
    s = open_store(tmp_path)
    try:
        cq = s.find_queue("T", 2)
        assert cq is not None and cq.max_offset == k
        assert [cq.entry(i)[0] for i in range(k)] == put.physical_offsets
        assert s.producers.lookup(6, "T", 2, 0).phys == put.physical_offsets[0]
    finally:
        s.close()
