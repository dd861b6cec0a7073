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
