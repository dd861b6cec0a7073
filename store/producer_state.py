"""Idempotent producers' sequences, as the log holds them (Kafka's producer
state): for each producer id and queue, the last ``WINDOW`` batches it
stored (sequence, first queue offset, count, commit-log offset).

An idempotent producer numbers its batches per queue (0, 1, 2, ...) and
puts its id, the batch's sequence and its size into the properties of the
batch's first record, which carries ``FLAG_SEQUENCED`` (``format/record``).
Every record so flagged that the store writes (a master's send), dispatches
(a slave's replication) or recovers (a restart) is ``observe``d here, so a
slave that becomes master, or a broker that restarts, knows the sequences
its log holds. A send whose sequence is in the window is a retry of a batch
already stored: the broker answers it with the original result and stores
nothing; one older than the window is a retry too (sequences are sent in
order, at most ``WINDOW`` batches in flight per queue), answered without
offsets. The table is snapshotted with the checkpoint (only batches below
the checkpoint's offset: what recovery may cut is never in a snapshot), and
recovery replays the log from the snapshot's offset.
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from typing import Any, NamedTuple

from duomq.common.errors import ConfigError
from duomq.common.idempotence import sequence_of
from duomq.format import native
from duomq.format import record as rec

_HEAD = rec.fields("queue_id", "queue_offset", "flags", "topic_len", "tags_len", "keys_len",
                   "props_len")
WINDOW = 64                 # batches remembered per producer and queue
MAX_ENTRIES = 100_000       # producer-queue pairs remembered (least recently used dropped)


class Batch(NamedTuple):
    seq: int
    queue_offset: int
    records: int
    phys: int               # commit-log offset of its first record


OLD = Batch(-1, -1, 0, -1)  # a retry of a batch older than the window


class ProducerStates:
    def __init__(self):
        self._lock = threading.Lock()       # the serving loop writes, the checkpoint reads
        # (producer, topic, queue) -> its last batches by sequence, oldest first
        self._by: OrderedDict[tuple[int, str, int], dict[int, Batch]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._by)

    def observe(self, pid: int, topic: str, queue_id: int, batch: Batch) -> None:
        """A flagged record stored, dispatched or recovered (again: no change)."""
        key = (pid, topic, queue_id)
        with self._lock:
            window = self._by.get(key)
            if window is None:
                window = self._by[key] = {}
                while len(self._by) > MAX_ENTRIES:
                    self._by.popitem(last=False)
            else:
                self._by.move_to_end(key)
                if batch.seq in window:
                    return
                if len(window) >= WINDOW:                # the oldest one goes
                    del window[next(iter(window))]
            window[batch.seq] = batch

    def observe_record(self, view, phys: int) -> str | None:
        """A stored record at ``phys`` (None: not readable), observed if it
        is flagged; what is wrong with it, if something is."""
        if view is None:
            return f"no record at {phys}"
        qid, qoff, flags, lt, lg, lk, lp = _HEAD.unpack_from(view, 0)
        if not flags & rec.FLAG_SEQUENCED:
            return None
        p = rec.HEADER_SIZE
        # the plain case in C, as a master's send reads it (a slave observes
        # every idempotent batch it dispatches: ~10 us each in Python); any
        # other spelling, and every error, from the Python
        got = _sequence(view)
        try:
            pid, seq, count = got if got is not None else sequence_of(rec.decode_properties(
                bytes(view[p + lt + lg + lk:p + lt + lg + lk + lp])))
            topic = bytes(view[p:p + lt]).decode()
        except (ValueError, UnicodeDecodeError) as exc:
            return f"record at {phys}: {exc}"
        self.observe(pid, topic, qid, Batch(seq, qoff, count, phys))
        return None

    def lookup(self, pid: int, topic: str, queue_id: int, seq: int) -> Batch | None:
        """The stored batch ``seq`` is a retry of, ``OLD`` for one older than
        a full window (sequences arrive in order: it was stored), None for a
        new batch."""
        with self._lock:
            window = self._by.get((pid, topic, queue_id))
            if not window:
                return None
            found = window.get(seq)
            if found is not None:
                return found
            if len(window) >= WINDOW and seq < next(iter(window)):
                return OLD
            return None

    def truncate(self, offset: int) -> None:
        """The log was cut at ``offset``: forget the batches past it."""
        with self._lock:
            for key in list(self._by):
                kept = {q: b for q, b in self._by[key].items() if b.phys < offset}
                if kept:
                    self._by[key] = kept
                else:
                    del self._by[key]

    # ------------------------------------------------------------ snapshots
    def save(self, path: str, below: int) -> None:
        """Write the batches below ``below`` (a checkpoint's offset) to
        ``path`` atomically."""
        with self._lock:
            rows = [[pid, topic, qid, [list(b) for b in window.values() if b.phys < below]]
                    for (pid, topic, qid), window in self._by.items()]
        doc = {"offset": below, "producers": [r for r in rows if r[3]]}
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, separators=(",", ":"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def load(self, path: str) -> int | None:
        """Read a snapshot; the offset recovery must replay the log from
        (None: no snapshot). A damaged one is refused with a ConfigError
        naming it."""
        try:
            with open(path) as f:
                doc = json.load(f)
            rows = [(int(pid), str(topic), int(qid), [Batch(*map(int, b)) for b in batches])
                    for pid, topic, qid, batches in doc["producers"]]
            offset = int(doc["offset"])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"producer state {path} is damaged ({exc}): delete it to rebuild "
                              f"it from the log (the whole log is then read at start)") from None
        with self._lock:
            self._by.clear()
            for pid, topic, qid, batches in rows:
                self._by[(pid, topic, qid)] = {b.seq: b for b in batches[-WINDOW:]}
        return offset


_sequence: Any = native.declined     # bound by _bind: the C loops' sequence, or declining all


@native.chosen
def _bind(loops: Any) -> None:
    global _sequence
    _sequence = loops.sequence if loops is not None else native.declined
