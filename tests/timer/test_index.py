"""The timer index on real files: entries found by their slot, in the order
added; a checkpoint makes them durable and says where indexing resumes; a
crash at any point after one (before the next, or in the middle of writing
the wheel) finds exactly what it named; a damaged checkpoint starts over."""

import os

import pytest

from duomq.timer import index as ti
from duomq.timer.index import RECALL, TIMER, TimerEntry, TimerIndex, TimerIndexError, entry_time

T0 = 1_800_000_000_000          # a slot start (ms) well after the epoch


def test_entries_are_found_by_slot_in_the_order_added(tmp_path):
    idx = TimerIndex(str(tmp_path), slot_ms=1000, slots=100)
    idx.add(T0 + 500, 100, 40)
    idx.add(T0 + 10, 200, 41)
    idx.add(T0 + 1500, 300, 42)
    idx.add(T0 + 999, 400, 60, RECALL, origin=100)
    idx.add(T0 + 20, 500, 43, origin=90)            # a later copy of the timer first at 90
    assert idx.entries(T0) == [TimerEntry(T0 + 500, 100, 40, TIMER, 100),
                               TimerEntry(T0 + 10, 200, 41, TIMER, 200),
                               TimerEntry(T0 + 20, 500, 43, TIMER, 90)]
    assert idx.recalls(T0) == [TimerEntry(T0 + 999, 400, 60, RECALL, 100)]
    assert idx.entries(T0 + 1000) == [TimerEntry(T0 + 1500, 300, 42, TIMER, 300)]
    assert idx.recalls(T0 + 1000) == []
    assert idx.entries(T0 + 2000) == [] and idx.count(T0) == 3
    last, count = idx.head(T0)
    first, on = idx.read_chain(last, 2)               # newest first, in pieces
    rest, end = idx.read_chain(on, 10)
    assert [e.phys for e in first + rest] == [500, 200, 100] and end == ti.EMPTY
    assert idx.slot_start(T0 + 1999) == T0 + 1000


def test_a_slot_of_another_turn_of_the_ring_is_empty(tmp_path):
    idx = TimerIndex(str(tmp_path), slot_ms=1000, slots=10)
    idx.add(T0 + 1, 1, 1)
    later = T0 + 10 * 1000                     # the same slot, one turn on
    assert idx.entries(later) == []
    idx.add(later + 2, 2, 2)                   # the slot begins again
    assert idx.entries(later) == [TimerEntry(later + 2, 2, 2, TIMER, 2)]
    assert idx.entries(T0) == []


def test_a_checkpoint_survives_a_crash_and_what_came_after_it_is_indexed_again(tmp_path):
    idx = TimerIndex(str(tmp_path), slot_ms=1000, slots=100)
    for k in range(50):
        idx.add(T0 + k * 100, k, 10)
    idx.checkpoint(50)
    for k in range(50, 60):                    # indexed, not checkpointed: a crash now
        idx.add(T0 + k * 100, k, 10)
    # a kill -9 now: not closed, nothing more written (entries are written in one
    # pwrite at a checkpoint or a read: the checkpoint's own must be on disk)
    again = TimerIndex(str(tmp_path), slot_ms=1000, slots=100)
    assert again.position == 50
    got = [e.phys for s in range(7) for e in again.entries(T0 + s * 1000)]
    assert got == list(range(50))              # the ten after it: gone, to be indexed again
    for k in range(50, 60):
        again.add(T0 + k * 100, k, 10)
    got = [e.phys for s in range(7) for e in again.entries(T0 + s * 1000)]
    assert got == list(range(60))              # once each


def test_a_crash_while_the_wheel_is_written_applies_the_checkpoint_again(tmp_path, monkeypatch):
    idx = TimerIndex(str(tmp_path), slot_ms=1000, slots=100)
    idx.add(T0 + 1, 1, 10)
    idx.checkpoint(1)
    idx.add(T0 + 2, 2, 10)
    idx.add(T0 + 3000, 3, 10)

    def crash(changes):
        raise OSError("killed while writing the wheel")
    monkeypatch.setattr(idx, "_apply", crash)
    with pytest.raises(OSError):
        idx.checkpoint(3)                       # the journal is written, the wheel is not
    monkeypatch.undo()
    idx.close()
    again = TimerIndex(str(tmp_path), slot_ms=1000, slots=100)
    assert again.position == 3
    assert [e.phys for e in again.entries(T0)] == [1, 2]
    assert [e.phys for e in again.entries(T0 + 3000)] == [3]


def test_a_damaged_checkpoint_starts_the_index_over(tmp_path):
    idx = TimerIndex(str(tmp_path), slot_ms=1000, slots=100)
    idx.add(T0 + 1, 1, 10)
    idx.checkpoint(1)
    idx.close()
    path = tmp_path / "checkpoint"
    raw = bytearray(path.read_bytes())
    raw[3] ^= 0xFF
    path.write_bytes(bytes(raw))
    again = TimerIndex(str(tmp_path), slot_ms=1000, slots=100)
    assert again.position == 0 and again.entries(T0) == [] and again.log_length == 0


def test_a_wheel_of_another_shape_is_refused_and_memory_is_the_changed_slots(tmp_path):
    idx = TimerIndex(str(tmp_path), slot_ms=1000, slots=100)
    for k in range(1000):
        idx.add(T0 + k * 10, k, 10)            # ten slots
    assert len(idx._dirty) == 10
    idx.checkpoint(1000)
    assert not idx._dirty
    idx.close()
    assert os.path.getsize(tmp_path / "wheel") == 100 * ti.SLOT.size
    with pytest.raises(TimerIndexError, match="holds 100 slots, not 50"):
        TimerIndex(str(tmp_path), slot_ms=1000, slots=50)
    with pytest.raises(TimerIndexError, match="slots of 1000 ms, not 500"):
        TimerIndex(str(tmp_path), slot_ms=500, slots=100)
    ti.remove(str(tmp_path))
    assert TimerIndex(str(tmp_path), slot_ms=500, slots=50).position == 0


def test_a_checkpoint_on_a_full_disk_fails_and_loses_nothing(tmp_path, monkeypatch):
    """Every write of the index refused (ENOSPC): the checkpoint says so,
    what was added is still read back (from memory), and once the disk has
    room the next checkpoint makes all of it durable."""
    import errno
    idx = TimerIndex(str(tmp_path), slot_ms=1000, slots=100)
    for k in range(20):
        idx.add(T0 + k * 100, k, 10)
    real = os.pwrite

    def full(fd, data, offset):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "pwrite", full)
    with pytest.raises(OSError):
        idx.checkpoint(20)
    assert [e.phys for e in idx.entries(T0)] == list(range(10))      # read from memory
    assert idx.position == 0
    monkeypatch.setattr(os, "pwrite", real)
    idx.checkpoint(20)
    again = TimerIndex(str(tmp_path), slot_ms=1000, slots=100)     # (a kill -9 now)
    assert again.position == 20
    assert [e.phys for s in range(2) for e in again.entries(T0 + s * 1000)] == list(range(20))


def test_a_batch_of_timers_added_at_once_is_indexed_as_one_by_one(tmp_path, hot_loops):
    import random
    rng = random.Random(3)
    stored, roll = T0 - 1000, 60_000
    ats = [T0 + rng.randrange(5000) for _ in range(300)] + [T0 + 100 * 1000 + 5]  # another turn
    ats += [T0 + 10, T0 + 10, T0 + 90_000, T0 + 3_000_000]           # the same slot; rolled
    phys, sizes = list(range(0, len(ats) * 50, 50)), [50 + k for k in range(len(ats))]
    one = TimerIndex(str(tmp_path / "one"), slot_ms=1000, slots=100)
    many = TimerIndex(str(tmp_path / "many"), slot_ms=1000, slots=100)
    for k in (one, many):                                # what was there before, written
        k.add(T0 + 10, 99_000, 7)
        k.add(T0 + 4000, 99_100, 7)
        k.checkpoint(2)
    one.add(T0 + 1500, 98_000, 8)                         # and dirty
    many.add(T0 + 1500, 98_000, 8)
    whens = [entry_time(at, stored, roll) for at in ats]
    for w, p, s in zip(whens, phys, sizes, strict=True):
        one.add(w, p, s)
    soon = many.add_sent(ats, stored, roll, phys, sizes, near=T0 + 2000)
    assert soon == [k for k, w in enumerate(whens) if w < T0 + 2000] and soon
    assert whens[-2:] == [T0 - 1000 + roll] * 2                    # further ahead: rolled
    for k in (one, many):
        k.checkpoint(302)
    assert one.log_length == many.log_length
    for start in sorted({w - w % 1000 for w in whens} | {T0 + s * 1000 for s in range(6)}):
        assert one.entries(start) == many.entries(start) and one.head(start) == many.head(start)
    assert many.add_sent([], stored, roll, [], []) == []


def test_a_batch_of_bad_timers_adds_nothing(tmp_path, hot_loops):
    idx = TimerIndex(str(tmp_path), slot_ms=1000, slots=100)
    idx.add(T0, 1, 5)
    before = (idx.log_length, dict(idx._dirty), bytes(idx._unwritten))
    with pytest.raises((TypeError, ValueError)):
        idx.add_sent([T0, "x"], 0, 60_000, [1, 2], [5, 5])
    with pytest.raises(ValueError):
        idx.add_sent([T0, T0], 0, 60_000, [1], [5, 5])
    assert (idx.log_length, dict(idx._dirty), bytes(idx._unwritten)) == before
