"""MessageStore: the commit log plus its consume queues, for the broker.

Only the broker's serving thread calls ``put_batch`` and the read methods;
the flush services call ``commitlog.flush`` and ``checkpoint``. The store
does no networking and knows nothing of roles.
"""

from __future__ import annotations

import collections
import errno
import itertools
import logging
import math
import operator
import os
import threading
import time
import zlib
from dataclasses import dataclass

from crc32c import crc32c

from duomq.common.config import BrokerConfig
from duomq.common.errors import InvalidNameError, StoreFullError, UnsupportedVersionError
from duomq.common.flush_policy import thorough_due, worth_flushing
from duomq.common.message import PullStatus
from duomq.format import bulk_scan, seal
from duomq.format import record as rec
from duomq.store import bulk_dispatch
from duomq.store.checkpoint import Checkpoint
from duomq.store.commitlog import CommitLog
from duomq.store.consume_queue import CQ_UNIT, ConsumeQueue, pack_entries
from duomq.store.epoch_file import EpochFile
from duomq.store.key_index import KeyIndex
from duomq.store.producer_state import Batch, ProducerStates
from duomq.store.recovery import RecoveryReport, recover
from duomq.store.retention import deletable_prefix

log = logging.getLogger(__name__)


FILTER_SCAN_ENTRIES = 16_000   # most consume-queue entries one filtered read looks at
# the header fields dispatch reads
_DISPATCH = rec.fields("total_size", "magic", "crc", "queue_id", "queue_offset", "flags",
                       "topic_len", "tags_len", "keys_len", "props_len", "body_len")
_FLAGS = rec.fields("flags")
PRODUCER_SNAPSHOT_S = 10.0   # the producer-state snapshot is written at most this often
_PHYSICAL = rec.fields("physical_offset")
_MATCH = rec.fields("total_size", "magic", "queue_id", "queue_offset")
_TOPIC_LEN = rec.fields("topic_len")
_TAGS_AT = rec.fields("topic_len", "tags_len")


def _tags(buf, rel: int) -> bytes:
    lt, lg = _TAGS_AT.unpack_from(buf, rel)
    t = rel + rec.HEADER_SIZE + lt
    return bytes(buf[t:t + lg])
_KEY_LOOKUP = rec.fields("store_ts_ms", "topic_len", "tags_len", "keys_len")


@dataclass(slots=True)
class PutResult:
    queue_offset: int              # queue offset of the first record
    physical_offsets: list[int]    # commit-log offset of each record
    end_offset: int                # commit-log offset just past the batch


@dataclass(slots=True)
class GetResult:
    records: bytes                 # stored records, concatenated
    count: int
    next_offset: int
    min_offset: int
    max_offset: int                # one past the newest visible entry
    status: PullStatus = PullStatus.FOUND
                                   # | NO_MATCHED_MESSAGE (all scanned entries filtered out)


class MessageStore:
    def __init__(self, config: BrokerConfig):
        self.config = config
        self.full_logged = -60.0      # monotonic: when a full disk was last logged
        root = config.data_dir
        os.makedirs(root, exist_ok=True)
        self.commitlog = CommitLog(os.path.join(root, "commitlog"), config.segment_size_bytes)
        self.cq_root = os.path.join(root, "consumequeue")
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}
        self.checkpoint_file = Checkpoint(os.path.join(root, "checkpoint"))
        self.epoch_file = EpochFile(os.path.join(root, "epoch"))
        self.index = KeyIndex(os.path.join(root, "index"), config.index_slot_count,
                              config.index_max_entries)
        self.dispatched_offset = 0   # commit-log offset whose CQ entries are all written
        # (topic, queue, commit-log end) of each write of consume-queue entries,
        # for the serving thread to look at only those queues' held pulls
        # (written by the serving thread as master, the replication thread as slave)
        self.appended: collections.deque[tuple[str, int, int]] = collections.deque()
        self.recovery: RecoveryReport | None = None
        self._cq_lock = threading.Lock()   # queues dict: serving thread vs. checkpoint
        self._checkpointed = -1
        self._last_thorough_ms = -math.inf   # monotonic: when a checkpoint last flushed every queue
        self.messages_stored = 0
        # idempotent producers' sequences, as the log holds them (snapshotted
        # with the checkpoint, at most every PRODUCER_SNAPSHOT_S)
        self.producers = ProducerStates()
        self.producer_state_path = os.path.join(root, "producer_state.json")
        self._snapshot_at = -PRODUCER_SNAPSHOT_S
        self._snapshot_offset = -1             # the offset the last snapshot was taken at

    # ------------------------------------------------------------ lifecycle
    def start(self) -> RecoveryReport:
        try:
            return self._start()
        except BaseException:       # nothing written: close what was opened, as it is
            self._close_files()
            raise

    def _start(self) -> RecoveryReport:
        self.commitlog.load()
        self._check_format()
        if os.path.isdir(self.cq_root):
            for topic in sorted(os.listdir(self.cq_root)):
                tdir = os.path.join(self.cq_root, topic)
                for qid in sorted(os.listdir(tdir)):
                    if not qid.isdigit():
                        continue
                    try:
                        cq = self._new_cq(topic, int(qid))
                    except InvalidNameError as exc:
                        log.error("ignoring consume-queue directory %s: %s",
                                  os.path.join(tdir, qid), exc)
                        continue
                    cq.load()
        self.index.load()
        start = self._verified_start(self.checkpoint_file.read())
        snapshot = self.producers.load(self.producer_state_path)
        if snapshot is not None and start is not None and snapshot < start:
            start = self._verified_start(snapshot)    # replay what the snapshot lacks
        sequenced: list[int] = []
        self.recovery = recover(self.commitlog, start, self.consume_queue, self.index,
                                os.path.join(self.config.data_dir, "quarantine"),
                                self._first_entry_after, self._known_end(), sequenced)
        self.producers.truncate(self.commitlog.max_offset)
        self._observe(sequenced)
        end = self.commitlog.max_offset
        for cq in list(self.queues.values()):
            n = cq.truncate_beyond(end)
            if n:
                log.warning("dropped %d consume-queue entries of %s/%d past the commit log end",
                            n, cq.topic, cq.queue_id)
            cq.correct_min_offset(self.commitlog.min_offset)
        self.dispatched_offset = end
        self.checkpoint()
        # recovery read what it scanned through the mapping: unmap it, or those
        # pages stay cached whatever happens to the rest of the log (a restarted
        # master would never find its replayed backlog cold)
        self.commitlog.mfq.release_mappings()
        log.info("%s", self.recovery)
        return self.recovery

    def _known_end(self) -> int:
        """The end of the last record a consume queue points to."""
        ends = [e[0] + e[1] for cq in list(self.queues.values()) if cq.max_offset > cq.min_offset
                and (e := cq.entry(cq.max_offset - 1)) is not None]
        return max(ends, default=0)

    def _first_entry_after(self, pos: int) -> int | None:
        """The first record past ``pos`` that a consume queue points to."""
        found = [f for cq in list(self.queues.values()) if (f := cq.first_after(pos)) is not None]
        return min(found) if found else None

    def _verified_start(self, checkpoint: int | None) -> int | None:
        """Where recovery may start: the checkpoint if a record ends exactly
        there (the consume queues, flushed before every checkpoint, say where
        records end, and the record is checked), else the end of the last
        record that does end below it. A checkpoint with a valid CRC that
        points into a record is never taken for the end of the log."""
        if checkpoint is None or checkpoint <= self.commitlog.min_offset:
            return checkpoint
        seg = self.commitlog.mfq.find(checkpoint)
        if seg is not None and seg.base == checkpoint:       # a segment starts with a record
            return checkpoint
        best: tuple[int, int] | None = None
        for cq in self.queues.values():
            last = cq.last_below(checkpoint)
            if last is not None and (best is None or last[0] > best[0]):
                best = last
        record = self.read_record(best[0]) if best is not None else None
        if best is not None and (record is None or len(record) != best[1]):
            log.warning("consume-queue entry for %d does not match its record: recovery "
                        "starts below it", best[0])
            best = None
        end = best[0] + best[1] if best is not None else self.commitlog.min_offset
        if end != checkpoint:
            log.warning("checkpoint %d is not where a record ends (the last one checked ends at "
                        "%d): recovery scans from %d", checkpoint, end, end)
        return end

    def _check_format(self) -> None:
        """Refuse a log written in an earlier record format: recovery would
        take its records for damage and truncate them."""
        segments = self.commitlog.mfq.segments
        if segments and rec.SIZE_MAGIC.unpack_from(segments[0].mm, 0)[1] == rec.RECORD_MAGIC_V1:
            raise UnsupportedVersionError(
                f"the commit log in {self.config.data_dir} is in record format 1 (CRC-32 "
                f"bodies); this version reads formats 2 and 3. Nothing was changed: drain it "
                f"with the version that wrote it, or start this broker on an empty data_dir")

    def close(self) -> None:
        """Flush and checkpoint, with the producers' sequences snapshotted at
        the checkpoint: a clean restart replays nothing (a snapshot taken up
        to PRODUCER_SNAPSHOT_S earlier would make it read that much of the log
        again, through the mapping, keeping those pages mapped)."""
        self.commitlog.flush()
        self.checkpoint(final=True)
        self._close_files()

    def _close_files(self) -> None:
        for cq in list(self.queues.values()):
            cq.close()
        self.index.close()
        self.commitlog.close()

    # ------------------------------------------------------------ queues
    def _new_cq(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = ConsumeQueue(self.cq_root, topic, queue_id, self.config.cq_entries_per_segment)
        with self._cq_lock:
            self.queues[(topic, queue_id)] = cq
        return cq

    def consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = self.queues.get((topic, queue_id))
        return cq if cq is not None else self._new_cq(topic, queue_id)

    def find_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.queues.get((topic, queue_id))

    # ------------------------------------------------------------ write
    def put_batch(self, topic: str, queue_id: int, buf: bytearray, count: int,
                  numbering: tuple[int, int, int] | None = None) -> PutResult:
        """Validate, place, patch and write a producer's batch (one commit-log
        write per segment touched, one consume-queue write). Raises
        RecordError / RecordTooLargeError, or StoreFullError when the disk has
        no room for a file it needs, with nothing stored. ``numbering``: an
        idempotent batch's ``(producer id, sequence, count)`` as the SEND
        handler read it (else a flagged first record is read here)."""
        try:
            return self._put_batch(topic, queue_id, buf, count, numbering)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            raise self._full(exc) from None

    def _full(self, exc: OSError) -> StoreFullError:
        """The error for a write a full disk refused, logged at most once a minute."""
        cfg = self.config
        text = (f"broker {cfg.group}/{cfg.broker_id} cannot store: {exc.strerror or exc}; "
                f"nothing was stored")
        now = time.monotonic()
        if now - self.full_logged >= 60.0:
            self.full_logged = now
            log.warning("%s (logged once a minute while the disk stays full)", text)
        return StoreFullError(exc.errno or errno.ENOSPC, text)

    def _put_batch(self, topic: str, queue_id: int, buf: bytearray, count: int,
                   numbering: tuple[int, int, int] | None) -> PutResult:
        topic_b = topic.encode()
        crcs: list[int] = []
        bulk = bulk_scan.pays(count)
        scanned = bulk_scan.scan(buf, topic_b, self.config.max_message_bytes, count, crcs) \
            if bulk else None
        bounds, borns, hashes, keyed = scanned or rec.scan_batch(
            buf, topic_b, self.config.max_message_bytes, count, crcs)
        sizes = list(map(operator.sub, bounds[1:], bounds))
        offsets, plan = self.commitlog.place(sizes)
        cq = self.consume_queue(topic, queue_id)
        qoff = cq.max_offset
        now = time.time_ns() // 1_000_000
        if bulk:
            seal.patch_and_seal(buf, bounds, queue_id, qoff, offsets, now)
        else:
            patch, at = rec.PATCH.pack_into, rec.PATCH_OFFSET
            crc_of, set_crc, ca = crc32c, rec.CRC.pack_into, rec.CRC_OFFSET
            mv, hs = memoryview(buf), rec.HEADER_SIZE
            for qo, start, phys, born, c in zip(itertools.count(qoff), bounds, offsets, borns,
                                                crcs):
                patch(buf, start + at, queue_id, qo, phys, born, now)
                # seal: the stored crc covers the patched header, continued from the payload's
                set_crc(buf, start + ca, crc_of(mv[start + at:start + hs], c))
        flat = [0] * (3 * count)   # [phys, size, tag hash] per entry, interleaved in C
        flat[0::3], flat[1::3], flat[2::3] = offsets, sizes, hashes
        last_cq = cq.mfq.last()
        if last_cq is None or (qoff + count) * CQ_UNIT.size > last_cq.end:
            cq.reserve(qoff, count)            # a full disk fails here, with nothing written
        self.commitlog.write(buf, bounds, plan)
        cq.append(pack_entries(flat, count), qoff)
        if keyed:
            self.index.add_batch(topic_b, [bytes(buf[p:p + n]) for _i, p, n in keyed],
                                 [offsets[i] for i, _p, _n in keyed], now)
        if numbering is not None:                                # an idempotent batch
            pid, seq, n = numbering
            self.producers.observe(pid, topic, queue_id, Batch(seq, qoff, n, offsets[0]))
        elif _FLAGS.unpack_from(buf, 0)[0] & rec.FLAG_SEQUENCED:
            self.producers.observe_record(memoryview(buf), offsets[0])
        end = offsets[-1] + sizes[-1]
        self.appended.append((topic, queue_id, end))
        self.dispatched_offset = end
        self.messages_stored += count
        return PutResult(qoff, offsets, end)

    def put_records(self, items: list[tuple[str, int, bytes]]) -> list[PutResult]:
        """Store records the broker writes again (delayed, due, sent back),
        ``(topic, queue_id, record)`` in order: one ``put_batch`` per run of
        records bound for the same queue. Returns the PutResult of each run."""
        out = []
        for (topic, qid), run in itertools.groupby(items, key=lambda t: t[:2]):
            records = [r for _t, _q, r in run]
            out.append(self.put_batch(topic, qid, bytearray(b"".join(records)), len(records)))
        return out

    # ------------------------------------------------------------ replication
    def truncate_to(self, offset: int) -> tuple[int, int]:
        """Cut the log at ``offset`` (a record boundary shared with the new
        master): commit log, consume queues, checkpoint. Returns the bytes and
        records removed. Only while nothing else writes or reads the store."""
        end = self.commitlog.max_offset
        if offset >= end:
            return 0, 0
        records = 0
        with self._cq_lock:
            for cq in self.queues.values():
                records += cq.truncate_beyond(offset)
        self.commitlog.mfq.truncate(offset)
        self.index.truncate(offset)
        self.producers.truncate(offset)
        self.dispatched_offset = min(self.dispatched_offset, offset)
        self.messages_stored = max(0, self.messages_stored - records)
        self._checkpointed = self._snapshot_offset = -1
        self.checkpoint()
        return end - offset, records

    def read_raw(self, offset: int, max_bytes: int):
        """Commit-log bytes from ``offset`` as they lie on disk, within one
        segment, up to what is written (filler included): what a slave copies."""
        seg = self.commitlog.mfq.find(offset)
        if seg is None:
            return b""
        rel = offset - seg.base
        n = min(max_bytes, seg.wrote - rel)
        return seg.mm[rel:rel + n] if n > 0 else b""

    def append_raw(self, offset: int, data) -> int:
        """A slave's write: the master's bytes at the same offset (byte-identical
        logs). ``offset`` must be this log's end. Returns the new end."""
        end = self.commitlog.max_offset
        if offset != end:
            raise ValueError(f"replicated chunk at {offset} but the log ends at {end}")
        mfq = self.commitlog.mfq
        view = memoryview(data)
        pos = offset
        while view:
            seg = mfq.ensure(pos)
            rel = pos - seg.base
            n = min(len(view), seg.size - rel)
            seg.write(view[:n], rel)
            seg.wrote = rel + n
            view = view[n:]
            pos += n
        return pos

    def dispatch(self) -> int:
        """Build consume-queue entries for complete records past
        ``dispatched_offset`` (RocketMQ's reput); every record is checked
        (magic, lengths, CRC) and entries are written once per queue per call.
        Returns how many records were dispatched."""
        mfq = self.commitlog.mfq
        pos, end, n = self.dispatched_offset, self.commitlog.max_offset, 0
        pending: dict[tuple[bytes, int], list] = {}   # (topic, queue) -> [first qoff, flat]
        keyed: list = []                              # (topic, keys, phys, store time)
        sequenced: list[int] = []                     # idempotent batches' first records
        while pos < end:
            seg = mfq.find(pos)
            if seg is None:
                break
            rel, k = self._dispatch_segment(seg, pos - seg.base, pending, keyed, sequenced)
            n += k
            if rel is None:                          # the segment is done: the next one
                pos = seg.base + seg.size
            else:                                    # a record not all here yet
                pos = seg.base + rel
                break
        for key, batch in pending.items():          # one consume-queue write per queue
            self._dispatch_entries(key, batch)
        if keyed:
            self.index.add(keyed)
        self._observe(sequenced)
        # the queues first: whoever sees the new offset finds them (the serving thread)
        self.appended.extend((str(t, "utf-8"), q, pos) for t, q in pending)
        self.dispatched_offset = pos
        self.messages_stored += n
        return n

    def _dispatch_segment(self, seg, rel: int, pending: dict, keyed: list, sequenced: list
                          ) -> tuple[int | None, int]:
        """Collect the entries of one segment's records from ``rel`` into
        ``pending``, and those with keys into ``keyed``. Returns ``(None, count)`` when the segment is done (a
        filler, or too little room left for one), else ``(rel, count)`` with
        ``rel`` where an incomplete record starts. A run of many format-3
        records goes through ``bulk_dispatch`` first; the rest, and anything
        it refuses, through the record-by-record loop."""
        done = 0
        if seg.wrote - rel >= bulk_dispatch.BULK_MIN * rec.HEADER_SIZE:
            starts, end = bulk_dispatch.find_run(seg.mm, rel, seg.wrote, seg.size)
            scanned = bulk_dispatch.scan(seg.mm, seg.base, starts, end) \
                if len(starts) >= bulk_dispatch.BULK_MIN else None
            if scanned is not None:
                runs, bulk_keyed, bulk_sequenced = scanned
                for key, first, flat in runs:
                    self._pending_run(pending, key, first).extend(flat)
                keyed.extend(bulk_keyed)
                sequenced.extend(bulk_sequenced)
                rel, done = end, len(starts)
        out, n = self._scan_segment(seg, rel, pending, keyed, sequenced)
        return out, n + done

    def _scan_segment(self, seg, rel: int, pending: dict, keyed: list, sequenced: list
                      ) -> tuple[int | None, int]:
        """``_dispatch_segment`` record by record: the slave's hot loop."""
        unpack, crc32, crc_of = _DISPATCH.unpack_from, zlib.crc32, crc32c
        HS, RECORD, BLANK_, MIN = rec.HEADER_SIZE, rec.RECORD_MAGIC, rec.BLANK_MAGIC, rec.BLANK.size
        V2, SEALED, SEQUENCED = rec.RECORD_MAGIC_V2, rec.SEALED_FROM, rec.FLAG_SEQUENCED
        mm = seg.mm
        mv = memoryview(mm)
        base, wrote, seg_size = seg.base, seg.wrote, seg.size
        n = 0
        last_qid, last_topic, next_qoff = -1, None, -1
        flat: list[int] = []
        while True:
            left = wrote - rel
            if seg_size - rel < MIN:                 # too small for a filler: segment end
                return None, n
            if left < HS:                            # a filler, or a record not all here
                if left >= MIN:
                    fsize, fmagic = rec.SIZE_MAGIC.unpack_from(mv, rel)
                    if fmagic == BLANK_ and fsize <= left:
                        return None, n
                return rel, n
            size, magic, crc, qid, qoff, flags, lt, lg, lk, lp, lb = unpack(mv, rel)
            if magic != RECORD and magic != V2:
                if magic == BLANK_:
                    return (None, n) if size <= left else (rel, n)
                if magic == rec.RECORD_MAGIC_V1:
                    raise rec.OldFormatError(f"replicated record at {base + rel} is in record "
                                             f"format 1: the master runs an older duomq")
                raise rec.RecordError(f"damaged replicated record at {base + rel}")
            if size > left:
                return rel, n                        # the rest has not arrived yet
            nxt = rel + size
            if size != HS + lt + lg + lk + lp + lb or crc != (
                    crc_of(mv[rel + SEALED:rel + HS], crc_of(mv[rel + HS:nxt])) if magic == RECORD
                    else crc_of(mv[nxt - lb:nxt])):        # format 2: the body's
                raise rec.RecordError(f"damaged replicated record at {base + rel}")
            p = rel + HS
            topic = mm[p:p + lt]
            if qid != last_qid or qoff != next_qoff or topic != last_topic:
                flat = self._pending_run(pending, (topic, qid), qoff)
                last_qid, last_topic = qid, topic
            flat.extend((base + rel, size, crc32(mm[p + lt:p + lt + lg]) if lg else 0))
            if lk:
                k = p + lt + lg
                keyed.append((topic, mm[k:k + lk], base + rel, rec.STORE_TS.unpack_from(mv, rel)[0]))
            if flags & SEQUENCED:
                sequenced.append(base + rel)
            next_qoff = qoff + 1
            rel = nxt
            n += 1

    def _pending_run(self, pending: dict, key: tuple[bytes, int], qoff: int) -> list[int]:
        """The flat entry list that entries of ``key`` from queue offset
        ``qoff`` extend: the queue's pending run, or a new one when there is
        none or it does not end at ``qoff`` (what it holds is written first)."""
        batch = pending.get(key)
        if batch is None:
            batch = pending[key] = [qoff, []]
        elif qoff != batch[0] + len(batch[1]) // 3:   # not contiguous: write what we have
            self._dispatch_entries(key, batch)
            batch[0], batch[1] = qoff, []
        return batch[1]

    def _dispatch_entries(self, key, batch) -> None:
        first, flat = batch
        if not flat:
            return
        try:
            cq = self.consume_queue(str(key[0], "utf-8"), key[1])
        except (UnicodeDecodeError, InvalidNameError) as exc:
            raise rec.RecordError(f"a replicated record at {flat[0]} names a queue this "
                                  f"store refuses ({key[0]!r}, {key[1]}): {exc}") from None
        count = len(flat) // 3
        if first == cq.max_offset:
            cq.append(pack_entries(flat, count), first)
        else:                                        # recovery-style: place each entry
            for i in range(count):
                cq.put_entry(first + i, *flat[3 * i:3 * i + 3])

    # ------------------------------------------------------------ read
    def get_messages(self, topic: str, queue_id: int, offset: int, max_count: int,
                     max_bytes: int, visible_end: int,
                     tag_codes: frozenset[int] | None = None,
                     first_fits: bool = False) -> GetResult:
        """Stored records of a queue from ``offset``, only those ending at or
        below ``visible_end`` (the flushed or confirmed offset), within
        ``max_bytes`` but for the first record, which is always read (a pull
        must move on); with ``first_fits`` it must fit too, and when it does
        not the answer is NO_NEW_MESSAGE at ``offset`` (a PULL_MANY whose
        answer is full). With
        ``tag_codes``, entries whose tag code is not among them are skipped on
        the consume queue alone (up to FILTER_SCAN_ENTRIES of them per call):
        the commit log is read for matching records only, and ``next_offset``
        moves past the skipped ones."""
        cq = self.queues.get((topic, queue_id))
        if cq is None:
            return GetResult(b"", 0, 0, 0, 0, PullStatus.NO_NEW_MESSAGE)   # nothing written yet
        lo = cq.min_offset
        hi = self.visible_max_offset(cq, visible_end)
        if offset < lo or offset > cq.max_offset:
            return GetResult(b"", 0, lo if offset < lo else hi, lo, hi, PullStatus.OFFSET_ILLEGAL)
        if offset >= hi:
            return GetResult(b"", 0, offset, lo, hi, PullStatus.NO_NEW_MESSAGE)
        scan = max_count if tag_codes is None else max(max_count, FILTER_SCAN_ENTRIES)
        entries = cq.read(offset, min(scan, hi - offset))
        seg_size = self.commitlog.segment_size
        read = self.commitlog.read
        parts = []
        run_start = run_end = -1
        total = count = 0
        edges: list[int] = []                        # entries where a run starts or ends
        last = -1
        scanned = len(entries) // CQ_UNIT.size       # unless a limit stops the scan early
        for i, (phys, size, code) in enumerate(CQ_UNIT.iter_unpack(entries)):
            if tag_codes is not None and code not in tag_codes:
                continue
            if count == max_count or (total + size > max_bytes and (count or first_fits)):
                scanned = i
                break
            if phys == run_end and phys % seg_size:
                run_end += size
            else:
                if run_start >= 0:
                    parts.append(read(run_start, run_end - run_start))
                    edges.append(last)
                edges.append(i)
                run_start, run_end = phys, phys + size
            last = i
            total += size
            count += 1
        if run_start >= 0:
            parts.append(read(run_start, run_end - run_start))
            edges.append(last)
        if not self._edges_match(entries, edges, offset, queue_id):
            return self._get_checked(cq, entries, offset, scanned, tag_codes, max_count,
                                     max_bytes, lo, hi, first_fits)
        if any(p is None for p in parts):   # deleted under us by retention
            return GetResult(b"", 0, cq.min_offset, cq.min_offset, hi, PullStatus.OFFSET_ILLEGAL)
        if not count and not scanned:       # the first record did not fit (first_fits)
            return GetResult(b"", 0, offset, lo, hi, PullStatus.NO_NEW_MESSAGE)
        status = PullStatus.FOUND if count else PullStatus.NO_MATCHED_MESSAGE
        return GetResult(b"".join(parts), count, offset + scanned, lo, hi, status)

    def _edges_match(self, entries: bytes, edges: list[int], offset: int, queue_id: int) -> bool:
        """Do the entries where runs of contiguous records start and end match
        their records? A damaged entry breaks a run (its offset or its size is
        wrong), so a pull of batched records checks two headers per batch."""
        unpack, matches = CQ_UNIT.unpack_from, self._entry_matches
        for k in edges:
            phys, size, _code = unpack(entries, k * CQ_UNIT.size)
            if not matches(phys, size, queue_id, offset + k):
                return False
        return True

    def _get_checked(self, cq: ConsumeQueue, entries: bytes, offset: int, scanned: int,
                     tag_codes, max_count: int, max_bytes: int, lo: int, hi: int,
                     first_fits: bool = False) -> GetResult:
        """The slow path of a pull whose entries include a damaged one: serve
        the records before it, each checked, or deal with it when it is first."""
        good: list[tuple[int, int]] = []
        total = 0
        for i, (phys, size, code) in enumerate(CQ_UNIT.iter_unpack(entries[:scanned * CQ_UNIT.size])):
            if tag_codes is not None and code not in tag_codes:
                continue
            if len(good) == max_count or (total + size > max_bytes and (good or first_fits)):
                if not good:                # the first record did not fit (first_fits)
                    return GetResult(b"", 0, offset, lo, hi, PullStatus.NO_NEW_MESSAGE)
                break
            if not self._entry_matches(phys, size, cq.queue_id, offset + i):
                if not good:
                    return self._bad_entry(cq, offset + i, lo, hi)
                return GetResult(b"".join(bytes(self.commitlog.read(p, n)) for p, n in good),
                                 len(good), offset + i, lo, hi, PullStatus.FOUND)
            good.append((phys, size))
            total += size
        return self._bad_entry(cq, offset, lo, hi)     # not reached: some edge did not match

    def _entry_matches(self, phys: int, size: int, queue_id: int, queue_offset: int) -> bool:
        """Does the record at ``phys`` say what its consume-queue entry says?"""
        seg = self.commitlog.mfq.find(phys)
        if seg is None or phys + size > seg.base + seg.wrote or size < rec.HEADER_SIZE:
            return False
        got = _MATCH.unpack_from(seg.mm, phys - seg.base)
        return got[0] == size and got[2] == queue_id and got[3] == queue_offset and \
            got[1] in (rec.RECORD_MAGIC, rec.RECORD_MAGIC_V2)

    def _bad_entry(self, cq: ConsumeQueue, qoff: int, lo: int, hi: int) -> GetResult:
        """A consume-queue entry that does not match its record: repaired from
        the commit log when the record is found between its neighbours, else
        skipped (logged), so that no consumer is stuck on it."""
        if self._repair_entry(cq, qoff):
            log.error("consume-queue entry %s/%d@%d did not match its record: repaired from the "
                      "commit log", cq.topic, cq.queue_id, qoff)
            return GetResult(b"", 0, qoff, lo, hi, PullStatus.NO_MATCHED_MESSAGE)
        log.error("consume-queue entry %s/%d@%d does not match any record: skipped (the "
                  "message it pointed to cannot be found)", cq.topic, cq.queue_id, qoff)
        return GetResult(b"", 0, qoff + 1, lo, hi, PullStatus.NO_MATCHED_MESSAGE)

    def _repair_entry(self, cq: ConsumeQueue, qoff: int) -> bool:
        """Find the record of entry ``qoff`` between the records of its
        neighbours (walking the commit log record by record) and rewrite it."""
        before = cq.entry(qoff - 1) if qoff > cq.min_offset else None
        after = cq.entry(qoff + 1) if qoff + 1 < cq.max_offset else None
        pos = before[0] + before[1] if before and \
            self._entry_matches(before[0], before[1], cq.queue_id, qoff - 1) else None
        end = after[0] if after and \
            self._entry_matches(after[0], after[1], cq.queue_id, qoff + 1) else None
        if pos is None or end is None:
            return False
        topic_b = cq.topic.encode()
        mfq = self.commitlog.mfq
        while pos < end:
            seg = mfq.find(pos)
            if seg is None:
                return False
            try:
                size = rec.check_record(seg.mm, pos - seg.base, seg.base + seg.wrote - seg.base)
            except rec.RecordError:
                return False
            if size == -1:
                pos = seg.end
                continue
            got = _MATCH.unpack_from(seg.mm, pos - seg.base)
            lt = _TOPIC_LEN.unpack_from(seg.mm, pos - seg.base)[0]
            t = pos - seg.base + rec.HEADER_SIZE
            if got[2] == cq.queue_id and got[3] == qoff and seg.mm[t:t + lt] == topic_b:
                tags = _tags(seg.mm, pos - seg.base)
                cq.put_entry(qoff, pos, size, rec.tag_hash(tags))
                return True
            pos += size
        return False

    @staticmethod
    def visible_max_offset(cq: ConsumeQueue, visible_end: int) -> int:
        """One past the newest entry whose record ends at or below ``visible_end``."""
        hi = cq.max_offset
        if hi <= cq.min_offset:
            return hi
        e = cq.entry(hi - 1)
        if e is not None and e[0] + e[1] <= visible_end:
            return hi
        lo = cq.min_offset
        while lo < hi:
            mid = (lo + hi) // 2
            e = cq.entry(mid)
            if e is not None and e[0] + e[1] <= visible_end:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def read_record(self, phys: int, visible_end: int | None = None):
        """The stored record that starts at ``phys`` (a message id's offset),
        checked (magic, lengths, CRC); None if no record starts there or it
        ends past ``visible_end``."""
        head = self.commitlog.read(phys, 8) if phys >= self.commitlog.min_offset else None
        if head is None:
            return None
        size, magic = rec.SIZE_MAGIC.unpack_from(head, 0)
        if magic not in (rec.RECORD_MAGIC, rec.RECORD_MAGIC_V2) or size < rec.HEADER_SIZE or \
                (visible_end is not None and phys + size > visible_end):
            return None
        view = self.commitlog.read(phys, size)
        if view is None:
            return None
        try:
            rec.check_record(view, 0, size)
        except rec.RecordError:
            return None
        if _PHYSICAL.unpack_from(view, 0)[0] != phys:     # a body that looks like a record
            return None
        return view

    def query_by_key(self, topic: str, key: str, begin_ms: int, end_ms: int, max_num: int,
                     max_bytes: int, visible_end: int) -> list:
        """Stored records of ``topic`` with ``key`` among their keys, stored
        within ``[begin_ms, end_ms]``, newest first: at most ``max_num`` of
        them, and no more once ``max_bytes`` is reached. Each candidate from
        the index is checked against its record."""
        topic_b, key_b = topic.encode(), key.encode()
        out, seen, total = [], set(), 0
        for phys in self.index.candidates(topic_b, key_b, begin_ms, end_ms):
            if phys in seen:
                continue
            seen.add(phys)
            view = self.read_record(phys, visible_end)
            if view is None:
                continue
            stored, lt, lg, lk = _KEY_LOOKUP.unpack_from(view, 0)
            p = rec.HEADER_SIZE
            if not begin_ms <= stored <= end_ms or view[p:p + lt] != topic_b or \
                    key_b not in bytes(view[p + lt + lg:p + lt + lg + lk]).split():
                continue
            out.append(view)
            total += len(view)
            if len(out) >= max_num or total >= max_bytes:
                break
        return out

    def store_timestamp(self, phys: int) -> int | None:
        view = self.commitlog.read(phys, rec.HEADER_SIZE)
        return rec.STORE_TS.unpack_from(view, 0)[0] if view is not None else None

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """First queue offset whose message was stored at or after ``timestamp_ms``
        (binary search on store time); max offset when none."""
        cq = self.queues.get((topic, queue_id))
        if cq is None:
            return 0
        lo, hi = cq.min_offset, cq.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            e = cq.entry(mid)
            ts = self.store_timestamp(e[0]) if e else None
            if ts is None or ts < timestamp_ms:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def physical_at(self, topic: str, queue_id: int, queue_offset: int) -> int | None:
        cq = self.queues.get((topic, queue_id))
        if cq is None:
            return None
        e = cq.entry(queue_offset)
        return e[0] if e else None

    # ------------------------------------------------------------ durability
    def checkpoint(self, thorough: bool = True, final: bool = False) -> int:
        """Flush consume queues and record the offset recovery may start from:
        the lower of the flushed commit log, the dispatched consume queues and
        the first entry of any queue left unflushed. Not ``thorough`` (the
        periodic checkpoint, but every ``cq_flush_thorough_interval_ms``), a
        queue is flushed only with ``cq_flush_least_pages`` of entries
        written, as RocketMQ's flushConsumeQueueLeastPages: 10,000 queues
        each written a little would be 10,000 fdatasyncs a second."""
        offset = min(self.commitlog.mfq.flushed_offset(), self.dispatched_offset)
        cfg = self.config
        now_ms = time.monotonic() * 1000
        if thorough or thorough_due(now_ms, self._last_thorough_ms,
                                    cfg.cq_flush_thorough_interval_ms):
            thorough, self._last_thorough_ms = True, now_ms
        with self._cq_lock:
            queues = list(self.queues.values())
        held = offset
        for cq in queues:
            if worth_flushing(cq.unflushed, cfg.cq_flush_least_pages, thorough) \
                    or (cq.unflushed and cq.dirty_since < 0):
                cq.flush(offset)
            elif cq.unflushed and cq.dirty_since < held:
                held = cq.dirty_since
        offset = held
        self.index.flush()
        now = time.monotonic()
        if len(self.producers) and offset != self._snapshot_offset and (
                final or now - self._snapshot_at >= PRODUCER_SNAPSHOT_S):
            # first: the checkpoint never passes the snapshot's offset by
            # more than what recovery replays
            self.producers.save(self.producer_state_path, offset)
            self._snapshot_at, self._snapshot_offset = now, offset
        if offset != self._checkpointed:
            self.checkpoint_file.write(offset)
            self._checkpointed = offset
        return offset

    def _observe(self, sequenced: list[int]) -> None:
        """Idempotent batches' first records, stored or dispatched: their
        producers' sequences."""
        for phys in sequenced:
            wrong = self.producers.observe_record(self.read_record(phys), phys)
            if wrong:
                log.warning("an idempotent batch's sequence is not readable (%s): a retry of "
                            "it may be stored again", wrong)

    # ------------------------------------------------------------ retention
    def delete_expired(self, reserved_hours: float, min_consumed_phys: int | None,
                       now_s: float | None = None) -> int:
        """Delete expired commit-log segments and consume-queue entries below
        them (holding the queues against the checkpoint thread)."""
        mfq = self.commitlog.mfq
        with self._cq_lock:
            n = deletable_prefix(list(mfq.segments), time.time() if now_s is None else now_s,
                                 reserved_hours * 3600, min_consumed_phys,
                                 lambda s: os.path.getmtime(s.path))
            if n:
                gone = mfq.delete_first(n)
                log.info("retention deleted %d commit-log segments up to %d", n, gone[-1].end)
                for cq in list(self.queues.values()):
                    cq.correct_min_offset(self.commitlog.min_offset)
                self.index.delete_below(self.commitlog.min_offset)
        return n
