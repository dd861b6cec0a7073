"""Pulled records to Arrow record batches, the columns of the Spark source
(pure). A Spark partition is one queue's range, so topic, broker group and
queue id are constant columns; the per-record loop reads each header once."""

from __future__ import annotations

import struct

import pyarrow as pa
import pyarrow.compute as pc
from duomq.store import record as rec

SCHEMA_DDL = ("topic string, `group` string, queue_id int, queue_offset bigint, msg_id string, "
              "keys string, tags string, properties map<string,string>, body binary, "
              "born_timestamp timestamp, store_timestamp timestamp")
TS = pa.timestamp("us", tz="UTC")
ARROW_SCHEMA = pa.schema([
    ("topic", pa.string()), ("group", pa.string()), ("queue_id", pa.int32()),
    ("queue_offset", pa.int64()), ("msg_id", pa.string()), ("keys", pa.string()),
    ("tags", pa.string()), ("properties", pa.map_(pa.string(), pa.string())),
    ("body", pa.binary()), ("born_timestamp", TS), ("store_timestamp", TS)])

# size, magic | queue offset, physical offset, born, stored | lengths
_FIELDS = struct.Struct(">ii8xqqqq12xHHHII")


def _ms_to_ts(ms: list[int]) -> pa.Array:
    return pc.multiply(pa.array(ms, pa.int64()), 1000).cast(TS)


def records_to_batch(buf, topic: str, group: str, queue_id: int) -> pa.RecordBatch:
    """Decode concatenated stored records of one queue into a RecordBatch."""
    unpack = _FIELDS.unpack_from
    mv = memoryview(buf)
    HS, RM = rec.HEADER_SIZE, rec.RECORD_MAGIC
    qoffs, ids, keys, tags, props, bodies, borns, stores = [], [], [], [], [], [], [], []
    pos, end = 0, len(buf)
    prefix = f"{group}:"
    while pos < end:
        size, magic, qoff, phys, born, stored, lt, lg, lk, lp, lb = unpack(buf, pos)
        if magic != RM:
            raise rec.RecordError(f"bad magic in pulled data at {pos}")
        p = pos + HS + lt
        qoffs.append(qoff)
        ids.append(f"{prefix}{phys:016X}")
        tags.append(str(mv[p:p + lg], "utf-8", "replace") if lg else "")
        p += lg
        keys.append(str(mv[p:p + lk], "utf-8", "replace") if lk else "")
        p += lk
        props.append(list(rec.decode_properties(bytes(mv[p:p + lp])).items()) if lp else [])
        p += lp
        bodies.append(bytes(mv[p:p + lb]))
        borns.append(born)
        stores.append(stored)
        pos += size
    n = len(qoffs)
    return pa.RecordBatch.from_arrays([
        pa.array([topic] * n, pa.string()), pa.array([group] * n, pa.string()),
        pa.array([queue_id] * n, pa.int32()), pa.array(qoffs, pa.int64()),
        pa.array(ids, pa.string()), pa.array(keys, pa.string()), pa.array(tags, pa.string()),
        pa.array(props, ARROW_SCHEMA.field("properties").type), pa.array(bodies, pa.binary()),
        _ms_to_ts(borns), _ms_to_ts(stores)], schema=ARROW_SCHEMA)
