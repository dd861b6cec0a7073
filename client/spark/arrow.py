"""Pulled records to Arrow record batches, the columns of the Spark source
(pure).

Vectorised with numpy: one short Python loop finds where each record
starts; the headers are then gathered as one numpy record array, and keys,
tags and bodies become Arrow view arrays pointing into the pulled bytes,
which Arrow copies out in C. A Spark partition is one queue's range,
so topic, broker group and queue id are constant columns.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from numpy.lib.stride_tricks import sliding_window_view

from duomq.common.idempotence import SEQUENCING
from duomq.format import record as rec

SCHEMA_DDL = ("topic string, `group` string, queue_id int, queue_offset bigint, msg_id string, "
              "keys string, tags string, properties map<string,string>, body binary, "
              "born_timestamp timestamp, store_timestamp timestamp")
TS = pa.timestamp("us", tz="UTC")
PROPERTIES = pa.map_(pa.string(), pa.string())
ARROW_SCHEMA = pa.schema([
    ("topic", pa.string()), ("group", pa.string()), ("queue_id", pa.int32()),
    ("queue_offset", pa.int64()), ("msg_id", pa.string()), ("keys", pa.string()),
    ("tags", pa.string()), ("properties", PROPERTIES),
    ("body", pa.binary()), ("born_timestamp", TS), ("store_timestamp", TS)])

HEADER = rec.numpy_dtype()              # the stored header as a numpy record
_INLINE = np.arange(12)                 # an Arrow view holds up to 12 bytes inline
_HEX = np.frombuffer(b"0123456789ABCDEF", np.uint8)
_NIBBLE_SHIFTS = np.arange(60, -4, -4, dtype=np.uint64)
_SIZE = rec.fields("total_size")


def record_starts(buf) -> np.ndarray:
    """Where each of the concatenated records starts (their sizes chain)."""
    unpack, end = _SIZE.unpack_from, len(buf)
    starts: list[int] = []
    pos = 0
    append = starts.append
    while pos < end:
        append(pos)
        size = unpack(buf, pos)[0]
        if size < rec.HEADER_SIZE or pos + size > end:
            raise rec.RecordError(f"pulled data: bad record size {size} at {pos}")
        pos += size
    return np.array(starts, np.int64)


def _views(window: np.ndarray, data: pa.Buffer, src: np.ndarray, lens: np.ndarray,
           view_type: pa.DataType, target: pa.DataType) -> pa.Array:
    """The byte ranges [src, src + lens) of ``data`` as an array of
    ``target``: an Arrow view array over the pulled bytes (``window``: its
    12-byte windows, zero-padded at the end), then cast, which copies them
    out in C. The cast goes through the large type, Arrow's fast path."""
    n = len(src)
    head = window[src]                      # each value's first 12 bytes
    short = lens <= 12                      # held inline, zero-padded
    if short.any():
        head = np.where(_INLINE < lens[:, None], head, 0).astype(np.uint8)
    inline = head.view("<i4")
    views = np.empty((n, 4), "<i4")         # length | prefix | buffer 0 | offset
    views[:, 0] = lens
    views[:, 1] = inline[:, 0]
    views[:, 2] = np.where(short, inline[:, 1], 0)
    views[:, 3] = np.where(short, inline[:, 2], src)
    large = pa.large_string() if target == pa.string() else pa.large_binary()
    return (pa.Array.from_buffers(view_type, n, [None, pa.py_buffer(views), data])
            .cast(large).cast(target))


def _strings(window, data, src, lens) -> pa.Array:
    arr = _views(window, data, src, lens, pa.string_view(), pa.string())
    try:
        arr.validate(full=True)
    except pa.ArrowInvalid:       # not UTF-8: decoded with replacement characters
        raw = _views(window, data, src, lens, pa.binary_view(), pa.binary()).to_pylist()
        arr = pa.array([b.decode("utf-8", "replace") for b in raw], pa.string())
    return arr


def _constant(text: str, n: int) -> pa.Array:
    b = text.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(b)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets),
                                                  pa.py_buffer(b * n)])


def _msg_ids(group: str, physical: np.ndarray, flags: np.ndarray) -> pa.Array:
    """``record.make_msg_id`` vectorised: ``<group>:<epoch as 8 hex digits>
    <physical offset as 16>``, the epoch from each record's flags (a test
    holds the two to the same text)."""
    prefix = np.frombuffer(f"{group}:".encode(), np.uint8)
    n, at = len(physical), len(prefix)
    width = at + 24
    out = np.empty((n, width), np.uint8)
    out[:, :at] = prefix
    epochs = (flags.astype(np.int64) >> rec.EPOCH_SHIFT) & rec.EPOCH_MASK
    out[:, at:at + 8] = _HEX[(epochs.astype(np.uint64)[:, None] >> _NIBBLE_SHIFTS[8:]) & 0xF]
    out[:, at + 8:] = _HEX[(physical.astype(np.uint64)[:, None] >> _NIBBLE_SHIFTS) & 0xF]
    offsets = np.arange(n + 1, dtype=np.int32) * width
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets),
                                                  pa.py_buffer(out)])


def _properties(buf, src: np.ndarray, lens: np.ndarray) -> pa.Array:
    """Properties are rare: only records that have them are decoded."""
    n = len(src)
    counts = np.zeros(n, np.int32)
    keys: list[str] = []
    items: list[str] = []
    for i in np.flatnonzero(lens):
        props = rec.decode_properties(bytes(buf[src[i]:src[i] + lens[i]]))
        for k in SEQUENCING:                  # an idempotent batch's numbering: not a row's
            props.pop(k, None)
        counts[i] = len(props)
        keys.extend(props)
        items.extend(props.values())
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    return pa.MapArray.from_arrays(pa.array(offsets), pa.array(keys, pa.string()),
                                   pa.array(items, pa.string()), type=PROPERTIES)


def _timestamps(ms: np.ndarray) -> pa.Array:
    return pa.Array.from_buffers(TS, len(ms), [None, pa.py_buffer(ms.astype("<i8") * 1000)])


def records_to_batch(buf: bytes, topic: str, group: str, queue_id: int) -> pa.RecordBatch:
    """Decode concatenated stored records of one queue into a RecordBatch."""
    starts = record_starts(buf)
    n = len(starts)
    u8 = np.concatenate((np.frombuffer(buf, np.uint8), np.zeros(rec.HEADER_SIZE, np.uint8)))
    h = sliding_window_view(u8, rec.HEADER_SIZE)[starts].view(HEADER).reshape(n)
    window = sliding_window_view(u8, 12)
    wrong = (h["magic"] != rec.RECORD_MAGIC) & (h["magic"] != rec.RECORD_MAGIC_V2)
    if n and wrong.any():
        bad = int(starts[np.flatnonzero(wrong)[0]])
        raise rec.RecordError(f"bad magic in pulled data at {bad}")
    lg, lk = h["tags_len"].astype(np.int64), h["keys_len"].astype(np.int64)
    lp, lb = h["props_len"].astype(np.int64), h["body_len"].astype(np.int64)
    tags_at = starts + rec.HEADER_SIZE + h["topic_len"]
    keys_at = tags_at + lg
    props_at = keys_at + lk
    body_at = props_at + lp
    if n and (body_at + lb != starts + h["total_size"]).any():
        raise rec.RecordError("pulled data: field lengths do not add up to a record's size")
    data = pa.py_buffer(buf)
    return pa.RecordBatch.from_arrays([
        _constant(topic, n), _constant(group, n),
        pa.array(np.full(n, queue_id, np.int32)),
        pa.array(h["queue_offset"].astype("<i8")),
        _msg_ids(group, h["physical_offset"], h["flags"]),
        _strings(window, data, keys_at, lk), _strings(window, data, tags_at, lg),
        _properties(buf, props_at, lp),
        _views(window, data, body_at, lb, pa.binary_view(), pa.binary()),
        _timestamps(h["born_ts_ms"]), _timestamps(h["store_ts_ms"])], schema=ARROW_SCHEMA)
