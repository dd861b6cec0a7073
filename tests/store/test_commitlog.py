from duomq.format import record as rec
from duomq.store.commitlog import CommitLog


def records(n, size):
    out = []
    for i in range(n):
        body = bytes([65 + i % 26]) * (size - rec.HEADER_SIZE - 1)
        out.append(rec.encode_record(b"T", b"", b"", b"", body, 1))
    return out


def write(cl, recs):
    buf = bytearray(b"".join(recs))
    bounds = [0]
    for r in recs:
        bounds.append(bounds[-1] + len(r))
    offsets, plan = cl.place([len(r) for r in recs])
    for i, off in enumerate(offsets):
        rec.PATCH.pack_into(buf, bounds[i] + 12, 0, i, off, 1, 2)
        rec.seal(buf, bounds[i])            # as the store does
    cl.write(buf, bounds, plan)
    return offsets


def test_place_rolls_to_next_segment_without_spanning(tmp_path):
    cl = CommitLog(str(tmp_path), 1000)
    offsets = write(cl, records(7, 300))
    # three records fit in a 1000-byte segment; the fourth starts the next
    assert offsets == [0, 300, 600, 1000, 1300, 1600, 2000]
    assert [s.base for s in cl.mfq.segments] == [0, 1000, 2000]
    assert cl.max_offset == 2300
    # the filler closes the first segment
    seg = cl.mfq.segments[0]
    assert rec.check_record(seg.mm, 900, 1000) == -1


def test_exact_fit_needs_no_filler_and_reads_stay_in_one_segment(tmp_path):
    cl = CommitLog(str(tmp_path), 1000)
    offsets = write(cl, records(5, 250))
    assert offsets == [0, 250, 500, 750, 1000]
    for off in offsets:
        view = cl.read(off, 250)
        assert view is not None and rec.check_record(view, 0, 250) == 250
    assert cl.read(1000, 300) is None  # past the written end


def test_reload_finds_segments(tmp_path):
    cl = CommitLog(str(tmp_path), 1000)
    write(cl, records(4, 300))
    cl.flush()
    cl.close()
    again = CommitLog(str(tmp_path), 1000)
    again.load()
    assert [s.base for s in again.mfq.segments] == [0, 1000]
