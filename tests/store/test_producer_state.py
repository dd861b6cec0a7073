"""The producer-state table (pure, and its snapshot file): a window of
batches per producer and queue, retries found, older ones called OLD only
once the window is full, a cut log forgets what lay past it, snapshots
keep only what lies below their offset."""

import pytest

from duomq.common.errors import ConfigError
from duomq.store.producer_state import OLD, WINDOW, Batch, ProducerStates


def batch(seq):
    return Batch(seq, 10 * seq, 10, 1000 * seq)


def test_retries_are_found_and_new_batches_are_not():
    t = ProducerStates()
    assert t.lookup(1, "T", 0, 0) is None
    for seq in range(3):
        t.observe(1, "T", 0, batch(seq))
    t.observe(1, "T", 0, batch(1))                    # seen again: no change
    assert t.lookup(1, "T", 0, 1) == batch(1)
    assert t.lookup(1, "T", 0, 3) is None            # the next one
    assert t.lookup(2, "T", 0, 1) is None            # another producer
    assert t.lookup(1, "T", 1, 1) is None            # another queue


def test_older_than_a_full_window_is_old_and_a_gap_is_not():
    t = ProducerStates()
    t.observe(1, "T", 0, batch(5))
    assert t.lookup(1, "T", 0, 3) is None            # never stored (the window is not full)
    for seq in range(6, 6 + WINDOW):
        t.observe(1, "T", 0, batch(seq))
    assert t.lookup(1, "T", 0, 5) is OLD and t.lookup(1, "T", 0, 4) is OLD
    assert t.lookup(1, "T", 0, 6) == batch(6)


def test_a_cut_log_forgets_the_batches_past_the_cut():
    t = ProducerStates()
    for seq in range(4):
        t.observe(1, "T", 0, batch(seq))
    t.truncate(2000)                                  # batches 2 and 3 were past it
    assert t.lookup(1, "T", 0, 1) == batch(1) and t.lookup(1, "T", 0, 2) is None
    t.truncate(0)
    assert len(t) == 0


def test_a_snapshot_keeps_what_lies_below_its_offset(tmp_path):
    t = ProducerStates()
    for seq in range(4):
        t.observe(7, "T", 2, batch(seq))
    path = str(tmp_path / "producer_state.json")
    t.save(path, 2500)
    again = ProducerStates()
    assert again.load(path) == 2500
    assert again.lookup(7, "T", 2, 2) == batch(2) and again.lookup(7, "T", 2, 3) is None
    assert ProducerStates().load(str(tmp_path / "none.json")) is None
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ConfigError, match="damaged"):
        ProducerStates().load(str(tmp_path / "bad.json"))


@pytest.mark.parametrize("loops", ["c", "python"])
def test_observed_records_give_the_same_table_read_in_c_or_in_python(loops, monkeypatch):
    """``observe_record`` (a slave's dispatch, a restart's recovery) reads a
    batch's numbering with the C loops when it is spelled plainly, else with
    the Python, which also names what is wrong: the same table, the same
    complaints, either way."""
    import random
    import struct

    from duomq.client.producer.producer import encode_batch
    from duomq.common.idempotence import sequence_of, sequencing
    from duomq.common.message import Message
    from duomq.format import native
    from duomq.format import record as rec
    if loops == "python":
        monkeypatch.setattr(native, "LOOPS", None)
    elif native.LOOPS is None:
        pytest.skip("built without the C loops")
    from duomq.store import producer_state
    read_in_python = []

    def python_reading(props):
        read_in_python.append(props)
        return sequence_of(props)
    monkeypatch.setattr(producer_state, "sequence_of", python_reading)
    rnd = random.Random(5)
    t = ProducerStates()
    want = {}
    for i in range(300):
        pid, seq, count = rnd.getrandbits(63), rnd.randrange(10**9), rnd.randrange(1, 9)
        topic, qid = rnd.choice(["T", "Orders", "\u00e9t\u00e9"]), rnd.randrange(4)
        msgs = [Message(topic, b"x" * rnd.randrange(50), keys=rnd.choice(["", "k"]),
                        properties=rnd.choice([None, {"a": "b"}])) for _ in range(count)]
        buf, _ = encode_batch(msgs, topic, 1, b"\x7f\x00\x00\x01\x00\x00\x00\x00", 1 << 20,
                              sequencing(pid, seq, count))
        buf = bytearray(buf)                 # as the broker stores it: its queue and offset
        for name, value in (("queue_id", qid), ("queue_offset", i)):
            struct.pack_into(">" + dict(rec.FIELDS)[name], buf, rec.OFFSET[name], value)
        assert t.observe_record(memoryview(buf), 1000 * i) is None
        want[(pid, topic, qid, seq)] = Batch(seq, i, count, 1000 * i)
    for (pid, topic, qid, seq), b in want.items():
        assert t.lookup(pid, topic, qid, seq) == b
    assert len(read_in_python) == (0 if loops == "c" else 300)
    plain = b"PRODUCER_ID\x01ff\x02PRODUCER_SEQ\x017\x02PRODUCER_BATCH\x012\x02"
    for props, said in [(plain.replace(b"ff", b"zz"), "needs"),
                        (plain.replace(b"\x012\x02", b"\x010\x02"), "out of range"),
                        (plain.replace(b"PRODUCER_SEQ\x017\x02", b""), "needs")]:
        bad = rec.encode_record(b"T", b"", b"", props, b"x", 1, flags=rec.FLAG_SEQUENCED)
        assert said in t.observe_record(memoryview(bad), 7)
    unflagged = rec.encode_record(b"T", b"", b"", plain, b"x", 1)
    assert t.observe_record(memoryview(unflagged), 8) is None and t.lookup(255, "T", 0, 7) is None
