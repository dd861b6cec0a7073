import zlib

import pytest

from duomq.common.message import decode_records
from duomq.format import record as rec


def enc(body=b"hello", topic=b"T", tags=b"TagA", keys=b"k1 k2", props=None, born=1234):
    return rec.encode_record(topic, tags, keys, rec.encode_properties(props or {"a": "1"}),
                             body, born, rec.pack_host("10.1.2.3", 99))


def stored(r: bytes) -> bytes:
    buf = bytearray(r)
    rec.seal(buf, 0)
    return bytes(buf)


def test_layout_and_roundtrip():
    r = stored(enc())
    assert rec.HEADER_SIZE == 74
    assert len(r) == 74 + 1 + 4 + 5 + len("a\x011\x02") + 5
    assert rec.check_record(r, 0, len(r)) == len(r)
    (m,) = decode_records(r, "broker-a")
    assert (m.topic, m.body, m.tags, m.keys, m.properties) == ("T", b"hello", "TagA", "k1 k2", {"a": "1"})
    assert m.born_timestamp_ms == 1234 and m.born_host == "10.1.2.3:99"
    assert m.key_list == ["k1", "k2"]
    assert m.msg_id == "broker-a:000000000000000000000000" and m.epoch == 0


def test_each_message_keeps_its_own_born_host():
    hosts = [("10.1.2.3", 99), ("10.1.2.4", 99), ("10.1.2.3", 99), ("", 0)]
    pull = b"".join(stored(rec.encode_record(b"T", b"", b"", b"", b"x", 1, rec.pack_host(h, p)))
                    for h, p in hosts)
    assert [m.born_host for m in decode_records(pull)] == \
        ["10.1.2.3:99", "10.1.2.4:99", "10.1.2.3:99", rec.format_host(rec.pack_host("", 0))]


def test_properties_roundtrip_and_reserved_separators():
    props = {"x": "y", "unicode": "é", "empty": ""}
    assert rec.decode_properties(rec.encode_properties(props)) == props
    with pytest.raises(ValueError):
        rec.encode_properties({"bad\x01": "v"})


@pytest.mark.parametrize("pos,what", [
    (0, "bad size"), (4, "bad magic"), (8, "CRC mismatch"), (12, "CRC mismatch"),
    (19, "CRC mismatch"), (27, "CRC mismatch"), (40, "CRC mismatch"), (50, "CRC mismatch"),
    (74, "CRC mismatch"), (76, "CRC mismatch"), (-1, "CRC mismatch")])
def test_check_record_detects_damage_anywhere_in_a_stored_record(pos, what):
    """Format 3: one flipped byte anywhere (the queue id at 12, the queue
    offset, the physical offset, the store time, the topic) is found."""
    r = bytearray(stored(enc()))
    r[pos] ^= 0xFF
    with pytest.raises(rec.RecordError, match=what):
        rec.check_record(r, 0, len(r))


def test_a_producer_record_is_not_a_stored_one_until_sealed():
    r = bytearray(enc())
    with pytest.raises(rec.RecordError, match="CRC mismatch"):
        rec.check_record(r, 0, len(r))
    rec.PATCH.pack_into(r, rec.PATCH_OFFSET, 3, 7, 4096, 1234, 99)
    rec.seal(r, 0)
    assert rec.check_record(r, 0, len(r)) == len(r)
    assert bytes(r) == rec.stored_record(b"T", b"TagA", b"k1 k2", rec.encode_properties(
        {"a": "1"}), b"hello", 1234, rec.pack_host("10.1.2.3", 99), queue_id=3, queue_offset=7,
        physical_offset=4096, store_ts_ms=99)


def as_old_format(record: bytes, magic: int, body_crc) -> bytearray:
    """A record of an earlier format: its magic, and ``body_crc`` of the body only."""
    r = bytearray(record)
    lb = rec.HEADER.unpack_from(r, 0)[14]
    rec.LEAD.pack_into(r, 0, len(r), magic, body_crc(r[len(r) - lb:]))
    return r


def as_format_2(record: bytes) -> bytearray:
    """A stored format-2 record: the body's CRC-32C only."""
    return as_old_format(record, rec.RECORD_MAGIC_V2, rec.body_crc)


def test_a_stored_format_2_record_is_still_read_but_not_taken_from_producers():
    old = as_format_2(enc())
    assert rec.check_record(old, 0, len(old)) == len(old)
    (m,) = decode_records(old)
    assert m.body == b"hello"
    old[-1] ^= 1
    with pytest.raises(rec.RecordError, match="body CRC mismatch"):
        rec.check_record(old, 0, len(old))
    with pytest.raises(rec.OldFormatError, match="record 0 is in record format 2.*upgrade"):
        rec.scan_batch(as_format_2(enc()), b"T", 1 << 20, 1)


def test_field_lengths_must_match_size():
    r = bytearray(enc())
    r[61] += 1  # topic_len low byte
    with pytest.raises(rec.RecordError, match="disagree"):
        rec.check_record(r, 0, len(r))


def test_blank_record():
    b = rec.blank_record(100)
    assert rec.check_record(b, 0, 100) == -1


def test_scan_batch_patches_nothing_and_reports_bounds():
    batch = bytearray(enc(b"a") + enc(b"bb", tags=b"") + enc(b"ccc"))
    bounds, borns, hashes, keyed = rec.scan_batch(batch, b"T", 1 << 20, 3)
    assert bounds[0] == 0 and bounds[-1] == len(batch) and len(bounds) == 4
    assert hashes == [zlib.crc32(b"TagA"), 0, zlib.crc32(b"TagA")]
    assert borns == [1234] * 3
    lk = len(b"k1 k2")
    assert [(i, bytes(batch[p:p + n])) for i, p, n in keyed] == [(0, b"k1 k2"), (1, b"k1 k2"),
                                                                  (2, b"k1 k2")]
    assert all(n == lk for _i, _p, n in keyed)
    assert rec.scan_batch(bytearray(enc(keys=b"")), b"T", 1 << 20, 1)[3] == []


def test_scan_batch_too_large():
    batch = bytearray(enc(b"x" * 500))
    with pytest.raises(rec.RecordTooLargeError, match="max_message_bytes"):
        rec.scan_batch(batch, b"T", 200, 1)


def test_scan_batch_rejects_other_topic_bad_count_and_garbage():
    with pytest.raises(rec.RecordError, match="topic"):
        rec.scan_batch(bytearray(enc(topic=b"U")), b"T", 1 << 20, 1)
    with pytest.raises(rec.RecordError, match="says 2"):
        rec.scan_batch(bytearray(enc()), b"T", 1 << 20, 2)
    with pytest.raises(rec.RecordError):
        rec.scan_batch(bytearray(b"\x00" * 80), b"T", 1 << 20, 1)
    with pytest.raises(rec.RecordError, match="truncated"):
        rec.scan_batch(bytearray(enc()[:50]), b"T", 1 << 20, 1)
    damaged = bytearray(enc())
    damaged[-1] ^= 1
    with pytest.raises(rec.RecordError, match="CRC"):
        rec.scan_batch(damaged, b"T", 1 << 20, 1)


def test_scan_batch_refuses_texts_that_are_not_utf8():
    bad = rec.encode_record(b"T", b"\xca", b"", b"", b"body", 1)
    with pytest.raises(rec.RecordError, match="UTF-8"):
        rec.scan_batch(bytearray(bad), b"T", 1 << 20, 1)
    # texts checked together: the culprit is still named, and a sequence one
    # record leaves open is not completed by the next record's text
    good = enc(tags=b"T\xc3\xa4g")
    batch = good + rec.encode_record(b"T", b"", b"k\xc3", b"", b"b", 1) + \
        rec.encode_record(b"T", b"\xa4", b"", b"", b"b", 1)
    with pytest.raises(rec.RecordError, match="record 1: tags, keys or properties are not UTF-8"):
        rec.scan_batch(bytearray(batch), b"T", 1 << 20, 3)
    assert len(rec.scan_batch(bytearray(good * 3), b"T", 1 << 20, 3)[0]) == 4


def test_decoding_never_fails_on_bad_text():
    raw = rec.encode_record(b"T", b"ok\xff", b"\xfe", b"a\x01\xff\x02", b"body", 1)
    (m,) = decode_records(raw)
    assert m.body == b"body" and m.tags.startswith("ok") and m.properties["a"] == "\ufffd"


def test_the_checksum_is_crc32c_of_the_payload_then_the_header():
    # the standard check value of CRC-32C (Castagnoli), not zlib's CRC-32 (0xCBF43926)
    assert rec.payload_crc(b"123456789") == 0xE3069283
    r = enc(b"payload", tags=b"", keys=b"", props={"a": "1"})
    payload = r[rec.HEADER_SIZE:]
    assert rec.HEADER.unpack_from(r, 0)[2] == rec.payload_crc(payload) != zlib.crc32(payload)
    s = stored(r)
    assert rec.HEADER.unpack_from(s, 0)[2] == rec.payload_crc(s[12:74], rec.payload_crc(payload))


def as_format_1(record: bytes) -> bytearray:
    """A format-1 record: the body checked with zlib's CRC-32."""
    return as_old_format(record, rec.RECORD_MAGIC_V1, zlib.crc32)


def test_a_format_1_record_is_named_not_taken_for_damage():
    old = as_format_1(stored(enc()))
    with pytest.raises(rec.OldFormatError, match="format-1"):
        rec.check_record(old, 0, len(old))
    batch = bytearray(enc(b"new")) + old
    with pytest.raises(rec.OldFormatError, match="record 1 is in record format 1.*upgrade"):
        rec.scan_batch(batch, b"T", 1 << 20, 2)


def test_the_layout_table_gives_the_documented_offsets():
    """The module docstring's table, field by field, from the one FIELDS table."""
    doc = {}
    for line in rec.__doc__.splitlines():
        words = line.split()
        if len(words) >= 3 and words[0].isdigit() and words[1].isdigit():
            doc[words[2]] = (int(words[0]), int(words[1]))
    assert doc == {name: (rec.OFFSET[name], rec.SIZE[name]) for name in rec.NAMES}
    assert sum(rec.SIZE.values()) == rec.HEADER_SIZE == rec.HEADER.size


def test_the_numpy_dtype_and_the_struct_agree_field_by_field():
    np = pytest.importorskip("numpy")
    dt = rec.numpy_dtype()
    assert dt.names == rec.NAMES and dt.itemsize == rec.HEADER_SIZE
    for name in rec.NAMES:
        field, offset = dt.fields[name]
        assert (offset, field.itemsize) == (rec.OFFSET[name], rec.SIZE[name]), name
    r = enc()
    h = np.frombuffer(r[:rec.HEADER_SIZE], dt)[0]
    unpacked = rec.Header._make(rec.HEADER.unpack_from(r, 0))
    for name in rec.NAMES:
        assert h[name] == getattr(unpacked, name), name


def test_partial_structs_read_the_named_fields():
    r = rec.encode_record(b"T", b"", b"", b"", b"x", 7, queue_id=3, queue_offset=9,
                          physical_offset=1 << 40, store_ts_ms=11)
    assert rec.fields("store_ts_ms").format == ">40xq"
    assert rec.fields("queue_id", "physical_offset").unpack_from(r, 0) == (3, 1 << 40)
    assert rec.STORE_TS.unpack_from(r, 0) == (11,)
    assert rec.PATCH.unpack_from(r, rec.PATCH_OFFSET) == (3, 9, 1 << 40, 7, 11)
    with pytest.raises(ValueError):
        rec.fields("queue_offset", "queue_id")       # out of order


def test_message_ids_round_trip():
    """An id is the group, the storing master's epoch (8 hex digits) and the
    commit-log offset (16); one of the earlier form (16 digits, no epoch)
    still parses, with no epoch."""
    assert rec.make_msg_id("broker-a", 0xABC, 7) == "broker-a:000000070000000000000ABC"
    assert rec.make_msg_id("broker-a", 0xABC) == "broker-a:000000000000000000000ABC"
    assert rec.parse_msg_id_epoch("broker-a:000000070000000000000ABC") == ("broker-a", 0xABC, 7)
    assert rec.parse_msg_id("broker-a:000000070000000000000ABC") == ("broker-a", 0xABC)
    assert rec.parse_msg_id_epoch("broker-a:0000000000000ABC") == ("broker-a", 0xABC, None)
    assert rec.parse_msg_id_epoch(rec.make_msg_id("g:x", 2**63 - 1, rec.EPOCH_MASK)) == \
        ("g:x", 2**63 - 1, rec.EPOCH_MASK)
    for bad in ("broker-a:12", ":0000000000000ABC", "broker-a0000000000000ABC",
                "broker-a:+000000000000ABC", "broker-a: 000000000000ABC",
                "broker-a:00000007000000000000_ABC", "broker-a:0000000700000000000000ABC"):
        with pytest.raises(ValueError):
            rec.parse_msg_id_epoch(bad)


def test_a_record_carries_the_epoch_of_the_master_that_sealed_it():
    """Bytes 56..58 (flags bits 8..30) are the broker's: the producer's own
    bits there are overwritten, its bit 0 (an idempotent batch) kept."""
    buf = bytearray(rec.encode_record(b"T", b"", b"", b"", b"x", 1,
                                      flags=0x7F000000 | rec.FLAG_SEQUENCED))
    buf[rec.EPOCH_AT:rec.EPOCH_AT + rec.EPOCH_BYTES] = rec.epoch_stamp(0x123456)
    rec.seal(buf, 0)
    assert rec.check_record(buf, 0, len(buf)) == len(buf)
    flags = rec.Header._make(rec.HEADER.unpack_from(buf, 0)).flags
    assert rec.record_epoch(flags) == 0x123456 and flags & rec.FLAG_SEQUENCED
    assert rec.epoch_stamp(rec.EPOCH_MASK + 5) == rec.epoch_stamp(4)    # 23 bits
