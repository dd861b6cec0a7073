"""The vectorised Arrow decoder against the record codec's own decoder."""

import datetime as dt
import random

import pytest

from duomq.client.spark.arrow import ARROW_SCHEMA, record_starts, records_to_batch
from duomq.common.message import decode_records
from duomq.format import record as rec


def records(n, seed=1):
    rnd = random.Random(seed)
    out, phys = [], 1 << 40
    for i in range(n):
        body = bytes(rnd.randrange(256) for _ in range(rnd.choice([0, 1, 12, 13, 100, 3000])))
        keys = rnd.choice(["", "k1", "user-1234 order-99", "ключ", "a" * 12, "b" * 13])
        tags = rnd.choice(["", "TagA", "éé", "x" * 40])
        props = rnd.choice([{}, {}, {"a": "1"}, {"trace": "t-9", "ü": "v"}])
        raw = rec.encode_record(b"Clicks", tags.encode(), keys.encode(),
                                rec.encode_properties(props), body, 1_763_800_000_000 + i,
                                queue_id=3, queue_offset=500 + i, physical_offset=phys,
                                store_ts_ms=1_763_800_000_123 + i)
        out.append(raw)
        phys += len(raw) * rnd.randrange(1, 5)
    return b"".join(out)


def ts(ms):
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC)


@pytest.mark.parametrize("n", [0, 1, 7, 500])
def test_batch_equals_the_record_codec(n):
    buf = records(n, seed=n)
    batch = records_to_batch(buf, "Clicks", "broker-a", 3)
    assert batch.schema == ARROW_SCHEMA
    want = decode_records(buf, "broker-a")
    rows = batch.to_pylist()
    assert len(rows) == len(want) == n
    for row, m in zip(rows, want, strict=True):
        assert row == {"topic": "Clicks", "group": "broker-a", "queue_id": 3,
                       "queue_offset": m.queue_offset, "msg_id": m.msg_id, "keys": m.keys,
                       "tags": m.tags, "properties": list(m.properties.items()),
                       "body": m.body, "born_timestamp": ts(m.born_timestamp_ms),
                       "store_timestamp": ts(m.store_timestamp_ms)}


def test_text_that_is_not_utf8_is_decoded_with_replacement():
    buf = rec.encode_record(b"T", b"\xff\xfetag", b"ok", b"", b"body", 1)
    row = records_to_batch(buf, "T", "g", 0).to_pylist()[0]
    assert row["tags"] == "\ufffd\ufffdtag" and row["keys"] == "ok"


def test_bad_data_is_refused_with_its_position():
    good = rec.encode_record(b"T", b"", b"", b"", b"x" * 20, 1)
    bad_magic = good[:4] + b"\0\0\0\0" + good[8:]
    with pytest.raises(rec.RecordError, match=f"bad magic in pulled data at {len(good)}"):
        records_to_batch(good + bad_magic, "T", "g", 0)
    with pytest.raises(rec.RecordError, match="bad record size"):
        record_starts(good + good[:10])
    lying = bytearray(good)
    lying[70:74] = (19).to_bytes(4, "big")          # body length one short of the size
    with pytest.raises(rec.RecordError, match="do not add up"):
        records_to_batch(bytes(lying), "T", "g", 0)
