"""format/seal.py: the vectorised patch and seal gives the bytes the
record-by-record path gives, for every kind of batch."""

import itertools
import random

import numpy as np
import pytest
from crc32c import crc32c

from duomq.client.producer.producer import encode_batch
from duomq.common.message import Message
from duomq.format import record as rec
from duomq.format import seal

HOST = b"\x7f\0\0\x01\0\0\x27\x10"
# each test twice: the C loops and the numpy path (format/native.py)
pytestmark = pytest.mark.usefixtures("hot_loops")


def one_by_one(buf, bounds, crcs, borns, queue_id, qoff, offsets, now, epoch=0):
    for i, (start, c) in enumerate(zip(bounds, crcs, strict=True)):
        rec.PATCH.pack_into(buf, start + rec.PATCH_OFFSET, queue_id, qoff + i, offsets[i],
                            borns[i], now)
        buf[start + rec.EPOCH_AT:start + rec.EPOCH_AT + rec.EPOCH_BYTES] = rec.epoch_stamp(epoch)
        rec.seal(buf, start)
        assert rec.CRC.unpack_from(buf, start + rec.CRC_OFFSET)[0] == crc32c(
            bytes(buf[start + rec.SEALED_FROM:start + rec.HEADER_SIZE]), c)


def batch(msgs, born=1_700_000_000_000):
    buf = bytearray(encode_batch(msgs, "Orders", born, HOST, 1 << 22)[0])
    crcs = []
    bounds, borns, _h, _k = rec.scan_batch(bytearray(buf), b"Orders", 1 << 22, len(msgs), crcs)
    return buf, bounds, borns, crcs


@pytest.mark.parametrize("n", [1, 2, 3, 17, 96, 300])
def test_same_bytes_as_record_by_record(n):
    rnd = random.Random(n)
    msgs = [Message("Orders", rnd.randbytes(rnd.randrange(0, 2000)),
                    tags=rnd.choice(["", "a", "tag-b"]), keys=rnd.choice(["", "k1", "k1 k2"]),
                    properties=rnd.choice([None, {"p": "v"}, {"DELAY": "3"}])) for _ in range(n)]
    buf, bounds, borns, crcs = batch(msgs)
    # offsets as if the batch crossed into a new segment half way
    offsets = [(1 << 40) + b if i < n // 2 else (1 << 41) + b for i, b in enumerate(bounds[:-1])]
    expect = bytearray(buf)
    one_by_one(expect, bounds[:-1], crcs, borns, 1023, 10**15, offsets, 1_800_000_000_123,
               n * 7919)
    seal.patch_and_seal(buf, bounds, 1023, 10**15, offsets, 1_800_000_000_123, n * 7919)
    assert buf == expect
    assert {rec.record_epoch(rec.Header._make(rec.HEADER.unpack_from(buf, at)).flags)
            for at in bounds[:-1]} == {n * 7919}
    for start, end in itertools.pairwise(bounds):
        assert rec.check_record(buf, start, end) == end - start
        assert rec.CRC.unpack_from(buf, start + rec.CRC_OFFSET)[0] == rec.stored_crc(
            buf, start, end - start)


def test_identical_records_and_one_that_differs_only_in_its_born_time():
    msgs = [Message("Orders", b"same")] * 200
    buf, bounds, borns, crcs = batch(msgs)
    born, at = rec.span("born_ts_ms", "born_ts_ms")
    born.pack_into(buf, bounds[150] + at, 42)         # a producer may vary it
    borns[150] = 42
    expect = bytearray(buf)
    one_by_one(expect, bounds[:-1], crcs, borns, 0, 0, bounds[:-1], 7)
    seal.patch_and_seal(buf, bounds, 0, 0, bounds[:-1], 7)
    assert buf == expect


def test_seals_of_random_rows():
    rnd = np.random.default_rng(7)
    rows = rnd.integers(0, 256, (500, seal.ROW), dtype=np.uint8)
    rows[:, 10:20] = rows[0, 10:20]                  # some columns alike, as in a batch
    got = seal.seals(rows)
    for row, s in zip(rows, got, strict=True):
        assert int(s) == crc32c(row[4:].tobytes(), int.from_bytes(row[:4].tobytes(), "big"))
