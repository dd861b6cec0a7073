"""The commit-log record layout (pure: no I/O).

Every field big-endian. One record::

    offset size field
    0      4    total_size     whole record, this field included
    4      4    magic          RECORD_MAGIC, or BLANK_MAGIC for an end-of-segment filler
    8      4    crc            CRC-32C (Castagnoli): see "Checksums" below
    12     4    queue_id
    16     8    queue_offset   index of the record's consume-queue entry
    24     8    physical_offset  commit-log offset of this record
    32     8    born_ts_ms     set by the producer
    40     8    store_ts_ms    set by the broker
    48     8    born_host      IPv4 (4) + port (4)
    56     4    flags
    60     2    topic_len
    62     2    tags_len
    64     2    keys_len
    66     4    props_len
    70     4    body_len
    74     -    topic, tags, keys, properties, body (in that order): the payload

``total_size == 74 + topic_len + tags_len + keys_len + props_len + body_len``.
Properties are ``name 0x01 value 0x02`` pairs (RocketMQ's encoding).

Checksums (format 3). A producer sends records with the broker fields zero
and ``crc`` = CRC-32C of the payload (``payload_crc``); the broker validates
each one (``scan_batch``), patches queue id, queue offset, physical offset
and store time in place (``PATCH`` at offset 12) and *seals* it: ``crc``
becomes CRC-32C of bytes 12..74 continued from the payload's CRC, so a stored
record's checksum covers every byte but its size and magic, which are checked
against the lengths and the format (``check_record``, used by recovery and by
a slave on every replicated record). Sealing costs one CRC of 62 bytes;
``format/seal.py`` patches and seals a large batch with numpy instead.
CRC-32C is computed with the CPU's CRC instruction, by the C loops' function
or, without them, the ``crc32c`` package's (``format/crc.py``).

The magic is also the format's version. Format 2 (``RECORD_MAGIC_V2``)
checksummed only the body: a stored format-2 record is still read and
checked that way, so a log written before the upgrade keeps serving, but
producers must send format 3. Format 1 (``RECORD_MAGIC_V1``, CRC-32 bodies)
is refused by name, never taken for damage.
"""

from __future__ import annotations

import functools
import mmap
import struct
import zlib
from collections import namedtuple
from typing import Any, NoReturn

from duomq.format.crc import crc32c

RECORD_MAGIC = 0xD0E0_0003 - (1 << 32)      # as a signed int: format 3
RECORD_MAGIC_V2 = 0xD0E0_0002 - (1 << 32)   # format 2: CRC-32C of the body only; still read
RECORD_MAGIC_V1 = 0xD0E0_0001 - (1 << 32)   # format 1: CRC-32 bodies, no longer read
BLANK_MAGIC = 0xD0E0_0B1A - (1 << 32)
FLAG_SEQUENCED = 0x1        # flags bit 0: the record opens an idempotent producer's batch
                            # and carries its sequence (common/idempotence.py)
# flags bits 8..30: the epoch of the master that stored the record (its
# bytes 56..58, written by the broker, sealed with the rest; 0 in a record
# stored before epochs were stamped). A message id carries it, so an id never
# names two messages: a record cut at a failover and the one the next
# master wrote at the same offset differ in it.
EPOCH_MASK = 0x7FFFFF
EPOCH_SHIFT = 8
EPOCH_AT, EPOCH_BYTES = 56, 3

# The header, field by field: every struct, offset and numpy dtype below is
# derived from this table.
FIELDS: tuple[tuple[str, str], ...] = (
    ("total_size", "i"), ("magic", "i"), ("crc", "I"), ("queue_id", "i"),
    ("queue_offset", "q"), ("physical_offset", "q"), ("born_ts_ms", "q"), ("store_ts_ms", "q"),
    ("born_host", "8s"), ("flags", "i"), ("topic_len", "H"), ("tags_len", "H"),
    ("keys_len", "H"), ("props_len", "I"), ("body_len", "I"))
NAMES = tuple(name for name, _ in FIELDS)
INDEX = {name: i for i, name in enumerate(NAMES)}           # position in HEADER.unpack
SIZE = {name: struct.calcsize(">" + code) for name, code in FIELDS}
OFFSET = {}                                                  # byte offset in the record
_at = 0
for _name in NAMES:
    OFFSET[_name] = _at
    _at += SIZE[_name]
del _at, _name

HEADER = struct.Struct(">" + "".join(code for _, code in FIELDS))
HEADER_SIZE = HEADER.size                      # 74
Header = namedtuple("Header", NAMES)  # type: ignore[misc]  # HEADER.unpack by name; names from FIELDS


def fields(*names: str) -> struct.Struct:
    """A Struct over a record's first bytes that unpacks only ``names`` (in
    layout order), skipping the others: ``fields("store_ts_ms")`` is
    ``>40xq``."""
    order = [INDEX[n] for n in names]
    if order != sorted(order) or len(set(order)) != len(order):
        raise ValueError(f"fields must be named once each, in layout order: {names}")
    codes, at = [">"], 0
    for name in names:
        if OFFSET[name] > at:
            codes.append(f"{OFFSET[name] - at}x")
        codes.append(dict(FIELDS)[name])
        at = OFFSET[name] + SIZE[name]
    return struct.Struct("".join(codes))


def span(first: str, last: str) -> tuple[struct.Struct, int]:
    """The contiguous fields ``first`` to ``last``: (their Struct, their offset)."""
    names = NAMES[INDEX[first]:INDEX[last] + 1]
    return struct.Struct(">" + "".join(dict(FIELDS)[n] for n in names)), OFFSET[first]


PATCH, PATCH_OFFSET = span("queue_id", "store_ts_ms")    # what the broker sets, in place
LEAD, _ = span("total_size", "crc")                       # a producer's per-record start
CRC, CRC_OFFSET = span("crc", "crc")
BODY_LEN, _ = span("body_len", "body_len")                # the header's last field
SIZE_MAGIC, _ = span("total_size", "magic")
BLANK = SIZE_MAGIC                                        # an end-of-segment filler's header
STORE_TS = fields("store_ts_ms")
NO_HOST = b"\0" * 8

_NUMPY = {"i": ">i4", "I": ">u4", "q": ">i8", "H": ">u2", "8s": "S8"}


@functools.cache
def numpy_dtype(last: str = NAMES[-1]) -> Any:
    """The header up to field ``last`` as a numpy record (big-endian,
    unaligned), for decoders that gather many headers at once. numpy is
    imported only when asked."""
    import numpy as np
    return np.dtype([(name, _NUMPY[code]) for name, code in FIELDS[:INDEX[last] + 1]])


PROP_SEP = "\x01"
PAIR_SEP = "\x02"


def plain_header_middle(born_ts_ms: int, host: bytes, topic_len: int) -> bytes:
    """Bytes 12..70 of the header of a record with no tags, keys or
    properties, as a producer writes it: the same for every such record of a
    batch, so the producer packs only ``LEAD`` and ``BODY_LEN`` per message."""
    return HEADER.pack(0, 0, 0, 0, 0, 0, born_ts_ms, 0, host, 0, topic_len, 0, 0, 0, 0)[
        PATCH_OFFSET:HEADER_SIZE - BODY_LEN.size]


class RecordError(ValueError):
    """A record that is not well formed."""


class OldFormatError(RecordError):
    """A well-formed record of a format no longer taken (``RECORD_MAGIC_V1``,
    or a format-2 record sent by a producer)."""


body_crc = crc32c                # CRC-32C of bytes (format 2 used it on the body alone)
payload_crc = crc32c             # ... of a record's payload, as a producer sends it
SEALED_FROM = PATCH_OFFSET       # a stored record's crc covers [12, 74) after the payload


def seal(buf: bytearray | memoryview, pos: int) -> None:
    """Turn the record at ``pos`` from a producer's form (crc of the payload)
    into its stored form (crc of bytes 12..74 continued from it). Call it once
    the broker fields are patched."""
    (c,) = CRC.unpack_from(buf, pos + CRC_OFFSET)
    CRC.pack_into(buf, pos + CRC_OFFSET, crc32c(buf[pos + SEALED_FROM:pos + HEADER_SIZE], c))


def stored_crc(buf: Buffer, pos: int, size: int) -> int:
    """The crc a stored format-3 record of ``size`` bytes at ``pos`` must carry."""
    return crc32c(buf[pos + SEALED_FROM:pos + HEADER_SIZE],
                  crc32c(buf[pos + HEADER_SIZE:pos + size]))


def encode_properties(props: dict[str, str] | None) -> bytes:
    if not props:
        return b""
    parts = []
    for k, v in props.items():
        k, v = str(k), str(v)
        if PROP_SEP in k or PAIR_SEP in k or PROP_SEP in v or PAIR_SEP in v:
            raise ValueError(f"property {k!r} contains a reserved separator (0x01 or 0x02)")
        parts.append(f"{k}{PROP_SEP}{v}{PAIR_SEP}")
    return "".join(parts).encode()


def decode_properties(raw: bytes) -> dict[str, str]:
    if not raw:
        return {}
    out = {}
    for pair in raw.decode(errors="replace").split(PAIR_SEP):
        if pair:
            k, _, v = pair.partition(PROP_SEP)
            out[k] = v
    return out


def encode_record(topic: bytes, tags: bytes, keys: bytes, props: bytes, body: bytes,
                  born_ts_ms: int, born_host: bytes = NO_HOST, flags: int = 0,
                  queue_id: int = 0, queue_offset: int = 0, physical_offset: int = 0,
                  store_ts_ms: int = 0) -> bytes:
    """One record's bytes as a producer sends it (crc of the payload). Field
    texts are already UTF-8 encoded. ``stored_record`` gives the sealed form."""
    lt, lg, lk, lp, lb = len(topic), len(tags), len(keys), len(props), len(body)
    if lt > 0xFFFF or lg > 0xFFFF or lk > 0xFFFF:
        raise RecordError("topic, tags and keys are limited to 65535 bytes each")
    total = HEADER_SIZE + lt + lg + lk + lp + lb
    crc = payload_crc(body, payload_crc(props, payload_crc(keys, payload_crc(
        tags, payload_crc(topic)))))
    return b"".join((
        HEADER.pack(total, RECORD_MAGIC, crc, queue_id, queue_offset,
                    physical_offset, born_ts_ms, store_ts_ms, born_host, flags,
                    lt, lg, lk, lp, lb),
        topic, tags, keys, props, body))


def stored_record(*args: Any, **kwargs: Any) -> bytes:
    """``encode_record``'s record as the store holds it (sealed): for tools
    and tests that write a commit log directly."""
    buf = bytearray(encode_record(*args, **kwargs))
    seal(buf, 0)
    return bytes(buf)


def blank_record(size: int) -> bytes:
    """An end-of-segment filler of ``size`` bytes (at least 8)."""
    return BLANK.pack(size, BLANK_MAGIC) + b"\0" * (size - BLANK.size)


_CHECK = fields("crc", "topic_len", "tags_len", "keys_len", "props_len", "body_len")


Buffer = bytes | bytearray | memoryview | mmap.mmap


def check_record(buf: Buffer, pos: int, limit: int) -> int:
    """Validate the stored record at ``pos``; return its size, -1 for an
    end-of-segment filler (its size is in the first field), or raise RecordError.

    Checks size bounds, magic, field lengths against the size, and the CRC:
    of the whole record for format 3, of the body for format 2.
    """
    if pos + 8 > limit:
        raise RecordError("truncated size field")
    size, magic = SIZE_MAGIC.unpack_from(buf, pos)
    if magic == BLANK_MAGIC and 8 <= size <= limit - pos:
        return -1
    if magic != RECORD_MAGIC and magic != RECORD_MAGIC_V2:
        if magic == RECORD_MAGIC_V1:
            raise OldFormatError(f"a format-1 record at {pos}")
        raise RecordError(f"bad magic at {pos}")
    if size < HEADER_SIZE or pos + size > limit:
        raise RecordError(f"bad size {size} at {pos}")
    crc, lt, lg, lk, lp, lb = _CHECK.unpack_from(buf, pos)
    if HEADER_SIZE + lt + lg + lk + lp + lb != size:
        raise RecordError(f"field lengths disagree with the size at {pos}")
    if magic == RECORD_MAGIC:
        if stored_crc(buf, pos, size) != crc:
            raise RecordError(f"CRC mismatch at {pos}")
    elif body_crc(buf[pos + size - lb:pos + size]) != crc:
        raise RecordError(f"body CRC mismatch at {pos}")
    return int(size)


_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def epoch_stamp(epoch: int) -> bytes:
    """The bytes 56..58 a master of ``epoch`` writes into each record it stores."""
    return (epoch & EPOCH_MASK).to_bytes(EPOCH_BYTES, "big")


def record_epoch(flags: int) -> int:
    """The epoch a record's flags carry (0: stored before epochs were stamped)."""
    return (flags >> EPOCH_SHIFT) & EPOCH_MASK


def make_msg_id(broker_group: str, physical_offset: int, epoch: int = 0) -> str:
    """A message id: the broker group, then 24 hex digits, the epoch of the
    master that stored the record (8) and its commit-log offset (16). Valid
    on every member of the group (RocketMQ's offset id, with the epoch: the
    same offset holds another message after a failover cut the first)."""
    return f"{broker_group}:{epoch & EPOCH_MASK:08X}{physical_offset:016X}"


def parse_msg_id_epoch(msg_id: str) -> tuple[str, int, int | None]:
    """``(broker group, commit-log offset, epoch)`` of a message id; the
    epoch is None in an id of the earlier form (16 hex digits, no epoch).
    ValueError when ``msg_id`` is not a message id."""
    group, sep, digits = msg_id.rpartition(":")
    if not sep or not group or len(digits) not in (16, 24) or not _HEX_DIGITS.issuperset(digits):
        raise ValueError(f"not a duomq message id: {msg_id!r} (<broker group>:<24 hex digits>)")
    value = int(digits, 16)
    if len(digits) == 16:
        return group, value, None
    return group, value & ((1 << 64) - 1), value >> 64


def parse_msg_id(msg_id: str) -> tuple[str, int]:
    """``(broker group, commit-log offset)`` of a message id (either form)."""
    group, offset, _epoch = parse_msg_id_epoch(msg_id)
    return group, offset


def offset_id(broker_group: str, physical_offset: int) -> str:
    """The group and a commit-log offset as 16 hex digits: a transaction's id
    (its half message's place) and the earlier form of a message id."""
    return f"{broker_group}:{physical_offset:016X}"


_TAGS_AT = fields("topic_len", "tags_len")


def tags_at(buf: bytes | bytearray | memoryview | mmap.mmap, rel: int) -> bytes:
    """The tags of the record that starts at ``rel`` of ``buf``."""
    lt, lg = _TAGS_AT.unpack_from(buf, rel)
    t = rel + HEADER_SIZE + lt
    return bytes(buf[t:t + lg])


def tag_hash(tags: bytes) -> int:
    """The consume queue's tag code: CRC32 of the tag (0 for no tag)."""
    return zlib.crc32(tags) if tags else 0


def format_host(raw: bytes) -> str:
    if raw == NO_HOST:
        return ""
    port = int.from_bytes(raw[4:], "big")
    return f"{raw[0]}.{raw[1]}.{raw[2]}.{raw[3]}:{port}"


def pack_host(host: str, port: int) -> bytes:
    try:
        parts = bytes(int(p) for p in host.split("."))
        if len(parts) != 4:
            raise ValueError
    except ValueError:
        parts = b"\0\0\0\0"
    return parts + int(port).to_bytes(4, "big")


class RecordTooLargeError(RecordError):
    pass


_SCAN = fields("total_size", "magic", "crc", "born_ts_ms", "topic_len", "tags_len",
               "keys_len", "props_len", "body_len")


def scan_batch(buf: bytearray, topic: bytes, max_record_bytes: int, count: int,
               crcs: list[int] | None = None
               ) -> tuple[list[int], list[int], list[int], list[tuple[int, int, int]]]:
    """Validate a producer's batch of encoded records (all for ``topic``).

    Returns ``(bounds, borns, tag_hashes, keyed)``: each record's start in
    ``buf`` (plus the end as the last bound), born time and tag hash, and
    ``(index, keys start, keys length)`` of the records that have keys; each
    record's payload CRC is appended to ``crcs`` when given (sealing goes on
    from it). Raises
    RecordTooLargeError or RecordError; nothing is stored in either case.
    The broker's hot path: one unpack of only the fields it checks, and one
    combined test per record (the slow path then names what is wrong).
    """
    unpack = _SCAN.unpack_from
    crc32, crc32c_ = zlib.crc32, payload_crc   # tag hashes, payloads
    mv = memoryview(buf)
    startswith = buf.startswith
    end = len(buf)
    last_header = end - HEADER_SIZE
    tlen = len(topic)
    HS, RM = HEADER_SIZE, RECORD_MAGIC
    bounds: list[int] = []
    borns: list[int] = []
    hashes: list[int] = []
    keyed: list[tuple[int, int, int]] = []
    texts: list[memoryview] = []
    add_bound, add_born, add_hash, add_text = bounds.append, borns.append, hashes.append, \
        texts.append
    add_crc = (crcs if crcs is not None else []).append
    pos = 0
    while pos < end:
        if pos > last_header:
            raise RecordError(f"record {len(borns)}: truncated header")
        size, magic, crc, born, lt, lg, lk, lp, lb = unpack(buf, pos)
        nxt = pos + size
        if magic != RM or size != HS + lt + lg + lk + lp + lb or nxt > end \
                or size > max_record_bytes or lt != tlen or not startswith(topic, pos + HS) \
                or crc32c_(mv[pos + HS:nxt]) != crc:
            _refuse(len(borns), mv, pos, end, topic, max_record_bytes)
        if lg + lk + lp:   # texts a consumer decodes: checked as UTF-8 after the loop
            p = pos + HS + lt
            add_text(mv[p:p + lg + lk + lp])
            add_hash(crc32(mv[p:p + lg]) if lg else 0)
            if lk:
                keyed.append((len(borns), p + lg, lk))
        else:
            add_hash(0)
        add_bound(pos)
        add_born(born)
        add_crc(crc)
        pos = nxt
    if len(borns) != count:
        raise RecordError(f"batch says {count} records but holds {len(borns)}")
    if texts:
        try:       # one decode for all: a newline ends any sequence a text leaves open
            str(b"\n".join(texts), "utf-8")
        except UnicodeDecodeError:
            _refuse_text(mv, bounds)
    bounds.append(end)
    return bounds, borns, hashes, keyed


def _refuse_text(mv: memoryview, bounds: list[int]) -> NoReturn:
    """Raise the error that names the first record whose texts are not UTF-8."""
    for i, pos in enumerate(bounds):
        lt, lg, lk, lp = _SCAN.unpack_from(mv, pos)[4:8]
        p = pos + HEADER_SIZE + lt
        try:
            str(mv[p:p + lg + lk + lp], "utf-8")
        except UnicodeDecodeError:
            raise RecordError(f"record {i}: tags, keys or properties are not UTF-8") from None
    raise RecordError("tags, keys or properties are not UTF-8")


def _refuse(i: int, mv: memoryview, pos: int, end: int, topic: bytes,
            max_record_bytes: int) -> NoReturn:
    """Raise the error that says what is wrong with record ``i`` at ``pos``."""
    size, magic, crc, _born, lt, lg, lk, lp, lb = _SCAN.unpack_from(mv, pos)
    if magic in (RECORD_MAGIC_V1, RECORD_MAGIC_V2):
        raise OldFormatError(f"record {i} is in record format "
                             f"{1 if magic == RECORD_MAGIC_V1 else 2}, which this broker no "
                             f"longer takes from producers: upgrade the client")
    if magic != RECORD_MAGIC:
        raise RecordError(f"record {i}: bad magic")
    if size != HEADER_SIZE + lt + lg + lk + lp + lb or pos + size > end:
        raise RecordError(f"record {i}: size {size} disagrees with its fields")
    if size > max_record_bytes:
        raise RecordTooLargeError(
            f"record {i} is {size} bytes, over max_message_bytes ({max_record_bytes})")
    if mv[pos + HEADER_SIZE:pos + HEADER_SIZE + lt] != topic:
        raise RecordError(f"record {i}: topic differs from the request's topic")
    raise RecordError(f"record {i}: payload CRC mismatch")
