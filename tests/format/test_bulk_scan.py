"""format/bulk_scan.py: the bulk check of a large batch gives what the
record-by-record scan gives, and leaves every batch it cannot vouch for to
it (None), whatever is wrong."""

import random

import pytest

from duomq.client.producer.producer import encode_batch
from duomq.common.idempotence import sequencing
from duomq.common.message import Message
from duomq.format import bulk_scan
from duomq.format import record as rec

HOST = b"\x7f\0\0\x01\0\0\x27\x10"
# each test twice: the C loops and the numpy path (format/native.py)
pytestmark = pytest.mark.usefixtures("hot_loops")


def batch(msgs, topic="Orders"):
    return bytearray(encode_batch(msgs, topic, 1_700_000_000_000, HOST, 1 << 22)[0])


def both(buf, count, topic=b"Orders", limit=1 << 22):
    c1, c2 = [], []
    return rec.scan_batch(bytearray(buf), topic, limit, count, c1), c1, \
        bulk_scan.scan(bytearray(buf), topic, limit, count, c2), c2


@pytest.mark.parametrize("n", [1, 2, 96, 256, 300])
@pytest.mark.parametrize("kind", ["same size", "mixed"])
def test_same_answer_as_record_by_record(n, kind):
    rnd = random.Random(n)
    if kind == "same size":
        msgs = [Message("Orders", b"x" * 100)] * n
    else:
        msgs = [Message("Orders", rnd.randbytes(rnd.randrange(0, 2000)),
                        tags=rnd.choice(["", "a", "tag-b"]), keys=rnd.choice(["", "k1", "k1 k2"]),
                        properties=rnd.choice([None, {"p": "v"}, {"DELAY": "3"}]))
                for _ in range(n)]
    slow, crcs, fast, fast_crcs = both(batch(msgs), n)
    assert fast == slow and fast_crcs == crcs


def test_records_of_one_size_but_one_longer():
    msgs = [Message("Orders", b"x" * 100)] * 150 + [Message("Orders", b"y" * 300)] + \
        [Message("Orders", b"x" * 100)] * 150
    slow, crcs, fast, fast_crcs = both(batch(msgs), 301)
    assert fast == slow and fast_crcs == crcs


def numbered(n):
    """An idempotent batch: the first record carries the numbering, the rest are one size."""
    return batch([Message("Orders", b"x" * 100, properties=sequencing(0x1234, 12345, n))] +
                 [Message("Orders", b"x" * 100)] * (n - 1))


@pytest.mark.parametrize("n", [1, 2, 256])
def test_a_numbered_first_record_keeps_the_stride(n):
    buf = numbered(n)
    slow, crcs, fast, fast_crcs = both(buf, n)
    assert bulk_scan.starts_of(buf, len(buf)) == slow[0][:-1]
    assert fast == slow and fast_crcs == crcs


@pytest.mark.parametrize("where", [1, 2, 100, 255])
def test_a_wrong_size_after_the_first_record_is_found(where):
    buf = numbered(256)
    starts = rec.scan_batch(bytearray(buf), b"Orders", 1 << 22, 256, [])[0][:-1]
    rec.fields("total_size").pack_into(buf, starts[where], 150)
    found = bulk_scan.starts_of(buf, len(buf))
    assert found is None or found != starts
    assert bulk_scan.scan(bytearray(buf), b"Orders", 1 << 22, 256, []) is None


def corrupt(buf, field, value, i=7, size=None):
    starts = bulk_scan.starts_of(buf, len(buf))
    s, at = rec.span(field, field)
    s.pack_into(buf, starts[i] + at, value)
    return buf


@pytest.mark.parametrize("damage", ["payload", "crc", "magic", "topic", "count", "tags utf-8",
                                    "too large", "size", "truncated", "other topic"])
def test_anything_wrong_is_left_to_the_record_by_record_scan(damage):
    msgs = [Message("Orders", b"x" * 100, tags="t")] * 200
    buf, count, topic, limit = batch(msgs), 200, b"Orders", 1 << 22
    starts = bulk_scan.starts_of(buf, len(buf))
    payload = starts[7] + rec.HEADER_SIZE
    if damage == "payload":
        buf[payload + 20] ^= 1
    elif damage == "crc":
        corrupt(buf, "crc", 12345)
    elif damage == "magic":
        corrupt(buf, "magic", rec.RECORD_MAGIC_V2)
    elif damage == "topic":
        buf[payload] ^= 0x20                            # "orders"
    elif damage == "count":
        count = 199
    elif damage == "tags utf-8":
        buf[payload + len(topic)] = 0xff                 # the tag byte: CRC no longer matches,
        corrupt(buf, "crc", rec.payload_crc(bytes(buf[payload:starts[8]])))   # so re-seal it
    elif damage == "too large":
        limit = starts[1] - 1
    elif damage == "size":
        corrupt(buf, "body_len", 99)
    elif damage == "truncated":
        buf = buf[:-10]
    elif damage == "other topic":
        topic = b"Other1"
    assert bulk_scan.scan(bytearray(buf), topic, limit, count, []) is None
    with pytest.raises(rec.RecordError):
        rec.scan_batch(bytearray(buf), topic, limit, count, [])
