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


def test_the_newest_entry_is_answered_from_memory_and_always_as_the_file_says(tmp_path):
    """The newest entry is kept as appended (every pull asks for it): after
    appends, an in-place repair, a truncation and appends again, each answer
    is what a fresh read of the file gives."""
    cq = ConsumeQueue(str(tmp_path), "T", 0, entries_per_segment=4)

    def on_file(q):
        raw = cq.read(q, 1)
        return CQ_UNIT.unpack(raw) if len(raw) == UNIT else None

    def check():
        for q in range(cq.max_offset + 1):
            assert cq.entry(q) == on_file(q), q
    for n in range(1, 6):
        base = cq.max_offset
        cq.append(pack_entries([x for i in range(n) for x in ((base + i) * 100, 100, n)], n),
                  base)
        check()
    assert cq.truncate_beyond(900) == 6                # entries 9..14 end past 900
    check()
    cq.append(pack_entries([5000, 10, 1], 1), cq.max_offset)
    assert cq.entry(cq.max_offset - 1) == (5000, 10, 1)
    check()
    cq.put_entry(cq.max_offset - 1, 7, 8, 9)          # a repair of the newest, in place
    assert cq.entry(cq.max_offset - 1) == (7, 8, 9)
    check()
    cq.min_offset = cq.max_offset                      # everything below retained away
    assert cq.entry(cq.max_offset - 1) is None
