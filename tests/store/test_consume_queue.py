from duomq.store.consume_queue import CQ_UNIT, UNIT, ConsumeQueue, pack_entries


def test_unit_is_20_bytes_and_packing_matches_struct():
    assert UNIT == 20
    flat = [100, 50, 7, 150, 60, 0]
    assert pack_entries(flat, 2) == CQ_UNIT.pack(100, 50, 7) + CQ_UNIT.pack(150, 60, 0)


def test_append_read_across_segments_and_reload(tmp_path):
    cq = ConsumeQueue(str(tmp_path), "T", 3, entries_per_segment=4)
    flat = []
    for i in range(10):
        flat += [i * 100, 100, i]
    cq.append(pack_entries(flat, 10), 0)
    assert cq.max_offset == 10
    assert len(cq.mfq.segments) == 3
    assert cq.entry(5) == (500, 100, 5)
    assert len(cq.read(2, 100)) == 2 * UNIT  # stops at the segment end
    cq.flush()
    cq.close()
    again = ConsumeQueue(str(tmp_path), "T", 3, entries_per_segment=4)
    again.load()
    assert (again.min_offset, again.max_offset) == (0, 10)
    assert again.entry(9) == (900, 100, 9)


def test_truncate_beyond_and_correct_min(tmp_path):
    cq = ConsumeQueue(str(tmp_path), "T", 0, entries_per_segment=4)
    cq.append(pack_entries([x for i in range(10) for x in (i * 100, 100, 0)], 10), 0)
    assert cq.truncate_beyond(650) == 4    # entries 6..9 end past 650
    assert cq.max_offset == 6
    cq.correct_min_offset(450)             # records below 450 are gone
    assert cq.min_offset == 5
    assert [s.base for s in cq.mfq.segments] == [4 * UNIT]


def test_a_queue_holds_one_file_descriptor_per_segment(tmp_path):
    """Consume queues are read with pread, not a mapping (Python's mmap keeps
    a second descriptor): 10,000 queues must fit 10,000 descriptors."""
    import os
    before = len(os.listdir("/proc/self/fd"))
    queues = []
    for q in range(50):
        cq = ConsumeQueue(str(tmp_path), "T", q, entries_per_segment=4)
        cq.append(pack_entries([q, 100, 7] * 5, 5), 0)      # two segments each
        queues.append(cq)
    assert len(os.listdir("/proc/self/fd")) - before == 100
    assert queues[7].entry(4) == (7, 100, 7)
    assert queues[7].read(0, 10) == CQ_UNIT.pack(7, 100, 7) * 4    # up to the segment end
    for cq in queues:
        cq.close()
    assert len(os.listdir("/proc/self/fd")) == before
