"""format/_native.c against the Python it stands in for: the same CRCs, the
same answer as record.scan_batch for every batch (None for every batch that
scan_batch refuses), the same seals, and damage found wherever it is."""

import functools
import itertools
import platform
import random
import struct

import crc32c
import pytest

from duomq.client.producer.producer import BROKER_ROUTED, encode_batch
from duomq.common.message import Message, decode_records
from duomq.common.transaction import TRANSACTION
from duomq.format import record as rec

HOST = b"\x7f\0\0\x01\0\0\x27\x10"
LIMIT = 1 << 22


def cpu_has_sse42() -> bool:
    if platform.machine() not in ("x86_64", "AMD64"):
        return False
    with open("/proc/cpuinfo") as f:
        return any(line.startswith("flags") and "sse4_2" in line.split() for line in f)


@pytest.fixture(params=["sse4.2", "table"])
def c(request, c_loops):
    """The C loops with each CRC-32C they may compute with: the CPU's
    instruction, and the table a CPU without SSE4.2 (or not x86-64) uses.
    The instruction is skipped only on a CPU that lacks it; a build that
    refuses it on a CPU that has it fails."""
    if request.param == "sse4.2" and not cpu_has_sse42():
        pytest.skip("this CPU has no SSE4.2 CRC-32C instruction")
    before = c_loops.use_crc(request.param)
    yield c_loops
    c_loops.use_crc(before)


def messages(rnd, n, topic="Orders"):
    return [Message(topic, rnd.randbytes(rnd.choice([0, 1, 7, 100, rnd.randrange(2000)])),
                    tags=rnd.choice(["", "", "a", "tag-é"]), keys=rnd.choice(["", "", "k1", "k1 k2"]),
                    properties=rnd.choice([None, None, {"p": "v"}])) for _ in range(n)]


def batch(msgs, topic="Orders"):
    return bytearray(encode_batch(msgs, topic, 1_700_000_000_000, HOST, LIMIT)[0])


def test_crc32c_is_the_crc32c_packages(c):
    rnd = random.Random(1)
    for n in [*range(0, 40), 63, 64, 65, 1000, 4097]:
        data = rnd.randbytes(n)
        for start in (0, 1, 0xFFFFFFFF, rnd.getrandbits(32)):
            assert c.crc32c(data, start) == crc32c.crc32c(data, start)
    assert c.CRC in ("sse4.2", "table")


def test_use_crc_switches_and_says_which(c_loops):
    before = c_loops.use_crc("table")
    try:
        assert c_loops.CRC == "table"
        assert c_loops.crc32c(b"123456789") == 0xE3069283       # CRC-32C's check value
        with pytest.raises(ValueError, match="no CRC-32C kind 'crc64'"):
            c_loops.use_crc("crc64")
        assert c_loops.CRC == "table"
    finally:
        c_loops.use_crc(before)
    assert c_loops.CRC == before


@pytest.mark.parametrize("seed", range(40))
def test_scan_answers_what_scan_batch_answers(c, seed):
    rnd = random.Random(seed)
    n = rnd.choice([1, 2, 5, 96, 300])
    msgs = messages(rnd, n)
    buf = batch(msgs)
    crcs = []
    bounds, borns, hashes, keyed = rec.scan_batch(bytearray(buf), b"Orders", LIMIT, n, crcs)
    got = c.scan(buf, b"Orders", LIMIT, n)
    assert got is not None
    g_bounds, g_borns, g_crcs, texts = got
    assert (g_bounds, g_borns, g_crcs) == (bounds, borns, crcs)
    with_texts = [i for i, m in enumerate(msgs) if m.tags or m.keys or m.properties]
    assert texts == with_texts


def damaged(rnd, kind):
    n = rnd.choice([1, 3, 200])
    buf = batch(messages(rnd, n))
    bounds = rec.scan_batch(bytearray(buf), b"Orders", LIMIT, n)[0]
    i = rnd.randrange(n)
    at, end = bounds[i], bounds[i + 1]
    count, topic, limit = n, b"Orders", LIMIT
    if kind == "payload":
        buf[rnd.randrange(at + rec.HEADER_SIZE, end)] ^= 1 << rnd.randrange(8)
    elif kind == "crc":
        buf[at + rec.CRC_OFFSET + rnd.randrange(4)] ^= 0x10
    elif kind == "magic":
        rec.SIZE_MAGIC.pack_into(buf, at, end - at, rec.RECORD_MAGIC_V2)
    elif kind == "size":
        rec.SIZE_MAGIC.pack_into(buf, at, end - at + rnd.choice([-1, 1, 1 << 20, -(1 << 30)]),
                                 rec.RECORD_MAGIC)
    elif kind == "length field":
        buf[at + rec.OFFSET["body_len"] + 3] ^= 0x01
    elif kind == "topic":
        topic = b"Ordert"
    elif kind == "count":
        count = n + (1 if n == 1 else rnd.choice([-1, 1]))
    elif kind == "limit":
        limit = max(map(int.__sub__, bounds[1:], bounds)) - 1
    elif kind == "truncated":
        del buf[len(buf) - rnd.randrange(1, 80):]
    elif kind == "trailing bytes":
        buf += b"\0" * rnd.randrange(1, 80)
    return buf, topic, limit, count


@pytest.mark.parametrize("kind", ["payload", "crc", "magic", "size", "length field", "topic",
                                  "count", "limit", "truncated", "trailing bytes"])
@pytest.mark.parametrize("seed", range(8))
def test_scan_refuses_every_batch_that_scan_batch_refuses(c, kind, seed):
    buf, topic, limit, count = damaged(random.Random(seed), kind)
    with pytest.raises(rec.RecordError):
        rec.scan_batch(bytearray(buf), topic, limit, count)
    assert c.scan(buf, topic, limit, count) is None


def test_scan_of_nothing_and_of_an_impossible_count_is_none(c):
    assert c.scan(b"", b"Orders", LIMIT, 1) is None
    buf = batch(messages(random.Random(0), 1))
    assert c.scan(buf, b"Orders", LIMIT, 0) is None
    assert c.scan(buf, b"Orders", LIMIT, -1) is None
    assert c.scan(buf, b"Orders", LIMIT, 2 ** 31) is None      # nothing allocated for it


def sealed(c, n, seed=0):
    """n random records sealed by ``c``: queue 3 from offset 77, each at 1000 + its start."""
    rnd = random.Random(seed)
    buf = batch(messages(rnd, n))
    bounds = rec.scan_batch(bytearray(buf), b"Orders", LIMIT, n)[0]
    c.seal(buf, bounds, 3, 77, [1000 + b for b in bounds[:-1]], 1_800_000_000_000, 12)
    return buf, bounds


def test_seal_matches_record_seal_and_check_record(c):
    buf, bounds = sealed(c, 50)
    for i, at in enumerate(bounds[:-1]):
        h = rec.Header._make(rec.HEADER.unpack_from(buf, at))
        assert (h.queue_id, h.queue_offset, h.physical_offset, h.store_ts_ms,
                rec.record_epoch(h.flags)) == (3, 77 + i, 1000 + at, 1_800_000_000_000, 12)
        assert rec.check_record(buf, at, len(buf)) == bounds[i + 1] - at   # raises if not sealed
    assert c.first_unsealed(buf, bounds[:-1]) == -1


def test_seal_refuses_a_record_outside_the_buffer_and_a_read_only_one(c):
    buf, bounds = sealed(c, 3)
    with pytest.raises(ValueError, match="not inside the buffer"):
        c.seal(buf, [0, len(buf) - 10], 0, 0, [0, 1], 0, 0)
    with pytest.raises(ValueError, match="values"):
        c.seal(buf, [0], 0, 0, [0, 1], 0, 0)
    with pytest.raises(TypeError):
        c.seal(bytes(buf), bounds, 0, 0, [0, 1, 2], 0, 0)


@pytest.mark.parametrize("where", ["size", "crc", "queue_id", "queue_offset", "physical_offset",
                                   "born_ts_ms", "store_ts_ms", "born_host", "flags",
                                   "topic_len", "props_len", "body_len", "payload"])
def test_first_unsealed_finds_any_changed_byte(c, where):
    buf, bounds = sealed(c, 20, seed=3)
    i = 13
    at = bounds[i]
    pos = at + rec.HEADER_SIZE + 2 if where == "payload" else \
        at + rec.OFFSET["total_size" if where == "size" else where] + (
            3 if where == "size" else rec.SIZE.get(where, 1) - 1)
    buf[pos] ^= 0x04
    assert c.first_unsealed(buf, bounds[:-1]) == i
    assert c.first_unsealed(buf, [*bounds[:-2], len(buf) - 10]) in (i, len(bounds) - 2)


def test_scan_and_first_unsealed_on_mutated_batches_agree_with_python_and_never_crash(c):
    """3,000 batches with random bytes changed, cut or appended, random counts
    and limits: scan and stage accept exactly what scan_batch accepts, with
    the same bounds (stage leaves what it refuses untouched), and
    first_unsealed takes any starts."""
    rnd = random.Random(17)
    accepted = 0
    for _ in range(3000):
        k = rnd.choice([1, 2, 3, 50])
        buf = batch(messages(rnd, k, topic="T"), topic="T")
        for _ in range(rnd.randrange(0, 4)):
            op = rnd.random()
            if op < 0.6:
                buf[rnd.randrange(len(buf))] = rnd.randrange(256)
            elif op < 0.8:
                del buf[rnd.randrange(len(buf) + 1):]
            else:
                buf += rnd.randbytes(rnd.randrange(1, 100))
        count = k if rnd.random() < 0.8 else rnd.randrange(-2, 100)
        limit = rnd.choice([LIMIT, rnd.randrange(0, 500)])
        try:
            want = rec.scan_batch(bytearray(buf), b"T", limit, count) if count > 0 else None
        except rec.RecordError:
            want = None
        got = c.scan(bytes(buf), b"T", limit, count)
        staged_buf = bytearray(buf)
        staged = c.stage(staged_buf, b"T", limit, count, 1, 0, 64, 1, 3) if count > 0 else None
        if want is None:     # (texts made invalid UTF-8 here also fail their record's CRC)
            assert got is None
            assert staged is None and staged_buf == buf        # refused, and left as it was
        else:
            assert got is not None and (got[0], got[1]) == (want[0], want[1])
            assert staged is not None and staged[0] == [64 + b for b in want[0][:-1]]
            accepted += 1
        c.first_unsealed(bytes(buf), [rnd.randrange(-5, len(buf) + 5) for _ in range(3)])
    assert accepted > 300


def some_messages(rnd, n, topic="Orders"):
    return [Message(topic, rnd.randbytes(rnd.choice([0, 1, 7, 100, rnd.randrange(70_000)])),
                    tags=rnd.choice(["", "", "a", "tag-\u00e9", "\U0001f600" * 3]),
                    keys=rnd.choice(["", "", "k1", ["k1", "k\u00e9"]]),
                    properties=rnd.choice([None, None, {"p": "v"}, {"trace": "\u00e9" * 300, "": ""},
                                           {str(i): "x" * i for i in range(20)}]))
            for _ in range(n)]


@pytest.mark.parametrize("seed", range(20))
def test_encode_gives_encode_batchs_bytes(c, seed, monkeypatch):
    from duomq.format import native
    rnd = random.Random(seed)
    msgs = some_messages(rnd, rnd.choice([1, 2, 50, 256]))
    got = c.encode(msgs, "Orders", 1_700_000_000_123, HOST, LIMIT, BROKER_ROUTED)
    monkeypatch.setattr(native, "LOOPS", None)
    want, scheduled = encode_batch(msgs, "Orders", 1_700_000_000_123, HOST, LIMIT)
    assert got == want and not scheduled
    bounds, _borns, _hashes, _keyed = rec.scan_batch(bytearray(got), b"Orders", LIMIT, len(msgs))
    assert len(bounds) == len(msgs) + 1
    decoded = decode_records(memoryview(got), "broker-a")
    assert [(m.properties, m.tags, m.keys) for m in decoded] == \
        [(m.properties, m.tags, m.keys) for m in msgs]


def test_encode_leaves_every_other_batch_to_python(c):
    """None (the Python encoder then encodes it, or says what is wrong)."""
    ok = Message("Orders", b"x", properties={"p": "v"})
    size = rec.HEADER_SIZE + len("Orders") + len(b"p\x01v\x02") + 1
    assert c.encode([ok], "Orders", 1, HOST, size, BROKER_ROUTED) is not None

    class Props(dict):
        pass

    class Text(str):
        pass

    m = functools.partial(Message, "Orders", b"x")
    for other in (Message("Payments", b"x"), m(tags="t" * 65536), m(keys="\ud800"),
                  Message("Orders", bytearray(b"x")), Message("Orders", memoryview(b"x")),
                  Message("Orders", b"xx", properties={"p": "v"}),          # over the limit
                  m(delay_level=2), m(properties={TRANSACTION: "true"}),     # routed by the broker
                  m(properties={"a\x01": "v"}), m(properties={"a": "v\x02"}),  # separators
                  m(properties={"a": 1}), m(properties={1: "a"}), m(properties={"a": "\udc80"}),
                  m(properties=Props(a="b")), m(properties={Text("a"): "b"})):
        assert c.encode([ok, other], "Orders", 1, HOST, size, BROKER_ROUTED) is None, other
    odd = Message("Orders", b"x")
    odd.tags = None                    # not a str: Python's encoder decides
    assert c.encode([odd], "Orders", 1, HOST, LIMIT, BROKER_ROUTED) is None
    assert c.encode([], "Orders", 1, HOST, LIMIT, BROKER_ROUTED) is None
    assert c.encode([ok], "O" * 65536, 1, HOST, 1 << 20, BROKER_ROUTED) is None
    with pytest.raises(ValueError, match="host is 6 bytes"):
        c.encode([ok], "Orders", 1, HOST[:6], LIMIT, BROKER_ROUTED)
    with pytest.raises(AttributeError):
        c.encode([ok, object()], "Orders", 1, HOST, LIMIT, BROKER_ROUTED)
    with pytest.raises(TypeError):
        c.encode([ok], "Orders", 1, HOST, LIMIT, set(BROKER_ROUTED))


@pytest.mark.parametrize("seed", range(10))
def test_encode_numbered_gives_encode_batchs_bytes_with_the_numbering_dict(c, seed, monkeypatch):
    """An idempotent producer's batch numbered in C (the numbering written
    after the first message's own properties, no dict, no copy of that
    message) is what ``encode_batch`` makes with ``sequencing``'s dict:
    the same bytes, or, for what C leaves to the Python (a delay, a
    transaction, a message naming a numbering property itself, a record
    over the limit), the same outcome as the Python path gives."""
    from duomq.client.producer.producer import encode_numbered
    from duomq.common.errors import MessageTooLargeError
    from duomq.common.idempotence import MAX_PRODUCER_ID, SEQUENCE, SEQUENCING, sequencing
    from duomq.format import native
    rnd = random.Random(seed)
    taken = 0
    for _ in range(40):
        msgs = some_messages(rnd, rnd.choice([1, 1, 2, 7]))
        if rnd.random() < 0.1:
            msgs[0].properties = {**msgs[0].properties, SEQUENCE: "9"}     # named by the caller
        if rnd.random() < 0.1:
            msgs[-1] = Message("Orders", b"later", delay_level=2)
        pid = rnd.choice([0, 1, 0xABCDEF, MAX_PRODUCER_ID, rnd.getrandbits(63)])
        seq = rnd.choice([0, 41, 10**17, rnd.randrange(10**12)])
        limit = rnd.choice([LIMIT, LIMIT, 700])
        got = c.encode(msgs, "Orders", 1_700_000_000_123, HOST, limit, BROKER_ROUTED,
                       rec.FLAG_SEQUENCED, SEQUENCING, pid, seq, len(msgs))
        outcomes = []
        for loops in (c, None):
            monkeypatch.setattr(native, "LOOPS", loops)
            try:
                outcomes.append(encode_numbered(msgs, "Orders", 1_700_000_000_123, HOST, limit,
                                                pid, seq))
            except MessageTooLargeError as exc:
                outcomes.append(type(exc))
        monkeypatch.setattr(native, "LOOPS", None)
        try:
            want = encode_batch(msgs, "Orders", 1_700_000_000_123, HOST, limit,
                                sequencing(pid, seq, len(msgs)))
        except MessageTooLargeError as exc:
            want = type(exc)
        assert outcomes == [want, want]
        if got is not None:
            taken += 1
            assert (got, False) == want
            assert c.sequence(got) == (pid, seq, len(msgs))
        elif SEQUENCE not in msgs[0].properties and not isinstance(want, type) \
                and not want[1]:
            # left to the Python though plain: only for what C never takes (tags past 65535, ...)
            assert c.encode(msgs, "Orders", 1_700_000_000_123, HOST, limit, BROKER_ROUTED) is None
    assert taken >= 10


def test_encode_numbered_leaves_odd_numbers_and_names_to_python(c):
    from duomq.common.idempotence import SEQUENCING
    ok = [Message("Orders", b"x")]
    args = ("Orders", 1, HOST, LIMIT, BROKER_ROUTED, rec.FLAG_SEQUENCED)
    assert c.encode(ok, *args, SEQUENCING, 1, 2, 1) is not None
    for names, pid, seq, count in [(SEQUENCING, -1, 2, 1), (SEQUENCING, 1, -2, 1),
                                   (SEQUENCING, 1 << 64, 2, 1), (SEQUENCING, 1, 2, 1.0),
                                   (SEQUENCING[:2], 1, 2, 1), (list(SEQUENCING), 1, 2, 1),
                                   (("a\x01", "b", "c"), 1, 2, 1), (("", "b", "c"), 1, 2, 1)]:
        assert c.encode(ok, *args, names, pid, seq, count) is None, (names, pid, seq)
    with pytest.raises(TypeError, match="without the three numbers"):
        c.encode(ok, *args, SEQUENCING)


def test_encode_survives_a_message_that_empties_the_batch_while_read(c):
    msgs = []

    class Sly(Message):
        @property
        def topic(self):
            msgs.clear()               # the list goes; the encoder keeps its own copy
            return "Orders"

        @topic.setter
        def topic(self, value):
            pass

    msgs += [Sly("Orders", b"a"), Message("Orders", b"b"), Message("Orders", b"c")]
    kept = list(msgs)
    got = c.encode(msgs, "Orders", 1, HOST, LIMIT, BROKER_ROUTED)
    assert got == b"".join(rec.encode_record(b"Orders", b"", b"", b"", m.body, 1, HOST)
                           for m in kept)


@pytest.mark.parametrize("seed", range(30))
def test_stage_makes_what_scan_seal_and_the_entries_make(c, seed):
    from duomq.format import seal as seal_mod
    from duomq.store.consume_queue import pack_entries
    rnd = random.Random(seed)
    n = rnd.choice([1, 2, 5, 96, 300])
    msgs = some_messages(rnd, n) if seed % 2 else messages(rnd, n)
    buf = batch(msgs)
    want_buf = bytearray(buf)
    crcs = []
    bounds, _borns, hashes, keyed = rec.scan_batch(bytearray(buf), b"Orders", LIMIT, n, crcs)
    offsets = [4096 + b for b in bounds[:-1]]
    seal_mod.patch_and_seal(want_buf, bounds, 5, 1234, offsets, 1_800_000_000_000, seed + 1)
    sizes = [b - a for a, b in zip(bounds, bounds[1:], strict=False)]
    flat = [x for i in range(n) for x in (offsets[i], sizes[i], hashes[i])]
    got = c.stage(buf, b"Orders", LIMIT, n, 5, 1234, 4096, 1_800_000_000_000, seed + 1)
    assert got is not None
    g_offsets, g_entries, g_keyed = got
    assert g_offsets == offsets and g_entries == pack_entries(flat, n)
    assert [(i, p, k) for i, p, k in g_keyed] == [(i, p, k) for i, p, k in keyed]
    assert buf == want_buf
    for at in bounds[:-1]:
        assert rec.check_record(buf, at, len(buf)) == sizes[bounds.index(at)]


@pytest.mark.parametrize("kind", ["payload", "crc", "magic", "size", "length field", "topic",
                                  "count", "limit", "truncated", "trailing bytes"])
@pytest.mark.parametrize("seed", range(4))
def test_stage_refuses_what_scan_refuses_and_leaves_the_batch_as_it_was(c, kind, seed):
    buf, topic, limit, count = damaged(random.Random(seed), kind)
    before = bytes(buf)
    assert c.stage(buf, topic, limit, count, 0, 0, 0, 1, 1) is None
    assert bytes(buf) == before


def test_stage_refuses_texts_that_are_not_utf8_as_the_python_path_does(c):
    """Tags, keys or properties that are not UTF-8 (their CRC made right):
    scan_batch raises, stage says None and leaves the bytes alone."""
    for field in ("tags", "keys", "properties"):
        r = bytearray(rec.encode_record(b"Orders", b"t\xff" if field == "tags" else b"t",
                                        b"k\xc3" if field == "keys" else b"k",
                                        b"p\x01\xe2\x82\x02" if field == "properties" else b"",
                                        b"body", 1))
        with pytest.raises(rec.RecordError):
            rec.scan_batch(bytearray(r), b"Orders", LIMIT, 1)
        before = bytes(r)
        assert c.stage(r, b"Orders", LIMIT, 1, 0, 0, 0, 1, 1) is None
        assert bytes(r) == before


def stored_records(rnd, n):
    """Stored records as a pull answer carries them: texts that are not
    UTF-8, properties (the sequencing ones of an idempotent batch among
    them), hosts, and signed fields at their limits."""
    from duomq.common.idempotence import SEQUENCING
    hosts = [rec.NO_HOST, HOST, b"\x0a\0\0\x02\0\0\x23\x82"]
    out = []
    for _ in range(n):
        props = rnd.choice([{}, {"p": "v"}, {"trace": "\u00e9" * 30, "": ""},
                            {k: str(rnd.randrange(1 << 40)) for k in SEQUENCING} | {"app": "1"},
                            {k: "7" for k in SEQUENCING}])
        raw_props = rnd.choice([rec.encode_properties(props), b"bad\xff\x01v\x02"])
        out.append(rec.encode_record(
            rnd.choice([b"Orders", b"Pay\xffments", b"%RETRY%g"]),
            rnd.choice([b"", b"a", "tag-\u00e9".encode(), b"\xc3"]),
            rnd.choice([b"", b"k1 k2", b"\xff\xfe"]), raw_props,
            rnd.randbytes(rnd.choice([0, 1, 100, rnd.randrange(5000)])),
            rnd.choice([0, 1_700_000_000_000, -1]), rnd.choice(hosts),
            flags=rnd.choice([0, rec.FLAG_SEQUENCED, 6, -1]),
            queue_id=rnd.choice([0, 3, (1 << 31) - 1, -(1 << 31)]),
            queue_offset=rnd.choice([0, rnd.randrange(1 << 62), -(1 << 63)]),
            physical_offset=rnd.randrange(1 << 62), store_ts_ms=rnd.choice([0, (1 << 63) - 1])))
    return out


def python_decode(buf, group):
    from duomq.common import message
    return message._decode_records(buf, group)


@pytest.mark.parametrize("seed", range(30))
def test_decode_gives_decode_records_messages(c_loops, seed):
    """Every field of every message as the Python loop makes it, from bytes,
    bytearrays and memoryviews."""
    from duomq.common.idempotence import SEQUENCING
    from duomq.common.message import MessageExt
    rnd = random.Random(seed)
    buf = b"".join(stored_records(rnd, rnd.choice([1, 2, 50, 256])))
    want = python_decode(buf, "broker-a")
    for form in (bytes, bytearray, memoryview):
        for readers in ((rec.decode_properties, rec.format_host), (None, None)):
            got = c_loops.decode(form(buf), "broker-a", MessageExt, *readers, SEQUENCING)
            assert got == want
            assert [type(m.body) for m in got] == [bytes] * len(want)
    assert decode_records(buf, "broker-a") == want


def test_decode_reads_any_property_block_and_host_as_the_python_readers(c_loops):
    """Properties and hosts read in C (props_of, host_of None): the dicts
    and texts record.decode_properties and format_host make, for property
    blocks of random bytes weighted to the separators and to UTF-8 cut or
    broken anywhere (empty pairs, pairs without a value, repeated keys), and
    for random hosts (NO_HOST, ports past 65535)."""
    from duomq.common.idempotence import SEQUENCING
    from duomq.common.message import MessageExt
    rnd = random.Random(5)
    alphabet = [b"\x01", b"\x02", b"a", b"k", "\u00e9".encode(), "\u20ac".encode()[:2],
                b"\xff", b"\xe2\x82", b"\xf0\x9f\x98", b"\x80", b"\x00", b"="]
    for _ in range(3000):
        props = b"".join(rnd.choice(alphabet) for _ in range(rnd.randrange(0, 24)))
        host = rnd.choice([rec.NO_HOST, rnd.randbytes(8), b"\0" * 4 + rnd.randbytes(4)])
        buf = rec.encode_record(b"T", b"", b"", props, b"body", 1, host,
                                flags=rnd.choice([0, rec.FLAG_SEQUENCED]))
        got = c_loops.decode(buf, "g", MessageExt, None, None, SEQUENCING)
        assert got == python_decode(buf, "g"), (props, host)
        assert got[0].born_host == rec.format_host(host)


def test_decode_leaves_what_is_not_a_whole_record_to_python(c_loops):
    """A cut, a damaged length or magic, a format-2 record: None, and the
    Python loop reads it (or says what is wrong) as before."""
    from duomq.common.idempotence import SEQUENCING
    from duomq.common.message import MessageExt
    rnd = random.Random(5)
    recs = stored_records(rnd, 3)
    buf = b"".join(recs)

    def c(b):
        return c_loops.decode(b, "g", MessageExt, rec.decode_properties, rec.format_host,
                              SEQUENCING)

    assert c(b"") == []
    whole = set(itertools.accumulate(len(r) for r in recs))
    for cut in range(1, len(buf)):
        if cut not in whole:
            assert c(buf[:cut]) is None, cut
    for field in ("total_size", "magic", "topic_len", "body_len", "props_len"):
        bad = bytearray(buf)
        at = rec.OFFSET[field] + rec.SIZE[field] - 1
        bad[at] ^= 0x01
        assert c(bytes(bad)) is None, field
    old = bytearray(recs[0])
    struct.pack_into(">i", old, rec.OFFSET["magic"], rec.RECORD_MAGIC_V2)
    assert c(bytes(old)) is None
    assert decode_records(bytes(old), "g") == python_decode(bytes(old), "g")


def test_decode_passes_on_what_its_helpers_raise(c_loops):
    from duomq.common.idempotence import SEQUENCING
    from duomq.common.message import MessageExt
    buf = rec.encode_record(b"T", b"", b"", b"p\x01v\x02", b"x", 1, HOST)

    def boom(raw):
        raise RuntimeError("props")

    with pytest.raises(RuntimeError, match="props"):
        c_loops.decode(buf, "g", MessageExt, boom, rec.format_host, SEQUENCING)
    with pytest.raises(TypeError):
        c_loops.decode(buf, "g", MessageExt, lambda raw: [], rec.format_host, SEQUENCING)
    with pytest.raises(ZeroDivisionError):
        c_loops.decode(buf, "g", MessageExt, rec.decode_properties, lambda h: 1 / 0, SEQUENCING)


@pytest.mark.parametrize("seed", range(4))
def test_decode_and_the_python_loop_agree_on_damaged_answers(c_loops, seed):
    """Byte flips, cuts and insertions anywhere in a pull answer: the C loop
    gives the Python loop's messages, or None where the Python loop refuses
    the answer (RecordError) or reads an older format; neither hangs on a
    record whose size is 0 or runs past the answer."""
    from duomq.common.idempotence import SEQUENCING
    from duomq.common.message import MessageExt
    rnd = random.Random(seed)
    clean = b"".join(stored_records(rnd, 5))
    for _ in range(500):
        buf = bytearray(clean)
        for _ in range(rnd.choice([1, 1, 2, 5])):
            how, at = rnd.randrange(3), rnd.randrange(len(buf))
            if how == 0:
                buf[at] = rnd.randrange(256)
            elif how == 1:
                del buf[at:at + rnd.randrange(1, 80)]
            else:
                buf[at:at] = rnd.randbytes(rnd.randrange(1, 80))
        buf = bytes(buf)
        try:
            want = python_decode(buf, "g")
        except rec.RecordError:
            want = None
        for readers in ((rec.decode_properties, rec.format_host), (None, None)):
            got = c_loops.decode(buf, "g", MessageExt, *readers, SEQUENCING)
            if got is None:
                assert want is None or \
                    rec.RECORD_MAGIC_V2.to_bytes(4, "big", signed=True) in buf
            else:
                assert got == want


def test_a_record_of_size_0_is_refused_not_read_forever():
    bad = bytearray(rec.encode_record(b"T", b"", b"", b"", b"x", 1))
    struct.pack_into(">i", bad, rec.OFFSET["total_size"], 0)
    with pytest.raises(rec.RecordError, match="lengths disagree"):
        python_decode(bytes(bad), "g")
    with pytest.raises(rec.RecordError, match="cut record"):
        python_decode(bytes(bad[:40]), "g")


def python_sequence(buf) -> tuple[int, int, int] | None:
    """The broker's Python reading of a batch's numbering (None where it refuses)."""
    from duomq.common.idempotence import sequence_of
    lt, lg, lk, lp = rec.fields("topic_len", "tags_len", "keys_len", "props_len").unpack_from(
        buf, 0)
    p = rec.HEADER_SIZE + lt + lg + lk
    try:
        return sequence_of(rec.decode_properties(bytes(buf[p:p + lp])))
    except ValueError:
        return None


def sequenced(props: bytes) -> bytearray:
    """A batch whose first record is flagged and carries ``props`` raw."""
    body = rec.encode_record(b"T", b"", b"", props, b"x", 1, flags=rec.FLAG_SEQUENCED)
    return bytearray(body)


def test_sequence_reads_what_the_producer_writes_as_the_python_does(c_loops):
    from duomq.common.idempotence import MAX_PRODUCER_ID, sequencing
    rnd = random.Random(7)
    for pid, seq, count in [(0, 0, 1), (MAX_PRODUCER_ID, 10**17, 256), (0xABCDEF, 41, 3)] + [
            (rnd.getrandbits(63), rnd.randrange(10**12), rnd.randrange(1, 1000))
            for _ in range(200)]:
        msgs = [Message("T", b"body", properties={"a": "b"}) for _ in range(count % 5 + 1)]
        buf, _ = encode_batch(msgs, "T", 1, HOST, LIMIT, numbering=sequencing(pid, seq, count))
        assert c_loops.sequence(buf) == python_sequence(buf) == (pid, seq, count)


def test_sequence_gives_way_to_the_python_wherever_it_is_not_plain(c_loops):
    """On any other spelling C answers None (the Python decides) or what the
    Python reads: never another number."""
    plain = b"PRODUCER_ID\x01ff\x02PRODUCER_SEQ\x017\x02PRODUCER_BATCH\x012\x02"
    cases = [b"", plain.replace(b"ff", b"0xff"), plain.replace(b"\x017\x02", b"\x01+7\x02"),
             plain.replace(b"\x017\x02", b"\x01-7\x02"), plain.replace(b"\x012\x02", b"\x010\x02"),
             plain + b"PRODUCER_SEQ\x018\x02", plain.replace(b"\x017", b"\x01 7"),
             plain.replace(b"ff", b"f" * 17), plain.replace(b"ff", b"8" + b"0" * 15),
             plain.replace(b"\x017\x02", b"\x011_000\x02"), plain.replace(b"\x017", b""),
             plain.replace(b"PRODUCER_SEQ\x017", b"PRODUCER_SEQ"), b"\xff\xfe" + plain,
             plain.replace(b"\x017\x02", b"\x017\x01\x02"), plain[:-1], plain + b"\x02\x02"]
    rnd = random.Random(11)
    for _ in range(3000):                        # and bytes changed at random
        b = bytearray(plain)
        for _ in range(rnd.randrange(1, 4)):
            b[rnd.randrange(len(b))] = rnd.choice(b"\x00\x01\x02019afAFxX_ +-\xff")
        cases.append(bytes(b))
    answered = 0
    for props in cases:
        buf = sequenced(props)
        got = c_loops.sequence(buf)
        if got is not None:
            answered += 1
            assert got == python_sequence(buf), props
    assert c_loops.sequence(sequenced(plain)) == (255, 7, 2)
    assert answered >= 20                           # the plain ones among them
    unflagged = bytearray(rec.encode_record(b"T", b"", b"", plain, b"x", 1))
    assert c_loops.sequence(unflagged) is None and c_loops.sequence(b"short") is None
    cut = sequenced(plain)[:rec.HEADER_SIZE + 5]    # properties past the buffer's end
    assert c_loops.sequence(cut) is None
