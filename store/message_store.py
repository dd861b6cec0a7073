"""MessageStore: the commit log plus its consume queues, for the broker.
This module holds its lifecycle (start and recovery, close, the
checkpoint, truncation, retention); it composes the write path
(``writes``), the read path (``reads``) and consume-queue dispatch
(``reput``), each holding the store's files by reference, and names their
public calls as its own.

One thread writes the store (``one_writer``: the serving thread, or a
slave's replication thread while it runs; a write from another thread is
refused); the serving thread calls the read methods; the flush services
call ``commitlog.flush`` and ``checkpoint``. The store does no networking
and knows nothing of roles.
"""

from __future__ import annotations

import collections
import logging
import math
import os
import threading
import time

from duomq.common.config import BrokerConfig
from duomq.common.errors import InvalidNameError, UnsupportedVersionError
from duomq.common.flush_policy import thorough_due, worth_flushing
from duomq.format import record as rec
from duomq.store.checkpoint import Checkpoint
from duomq.store.commitlog import CommitLog
from duomq.store.consume_queue import ConsumeQueue
from duomq.store.epoch_file import EpochFile
from duomq.store.key_index import KeyIndex
from duomq.store.one_writer import OneWriter
from duomq.store.producer_state import ProducerStates
from duomq.store.reads import FILTER_SCAN_ENTRIES, GetResult, StoreReads
from duomq.store.recovery import RecoveryReport, recover
from duomq.store.reput import Reput
from duomq.store.retention import deletable_prefix
from duomq.store.view import Fresh
from duomq.store.writes import PutResult, StoreWrites

__all__ = ["FILTER_SCAN_ENTRIES", "GetResult", "MessageStore", "PutResult"]

log = logging.getLogger(__name__)


PRODUCER_SNAPSHOT_S = 10.0   # the producer-state snapshot is written at most this often


class MessageStore:
    def __init__(self, config: BrokerConfig):
        self.config = config
        self.writer = OneWriter()     # the one thread that writes it (``one_writer``)
        self.epoch = 0                # the master's epoch, stamped into each record (MasterParts)
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
        self.fresh: Fresh | None = None   # the batch written last, for a pull of it
        # (topic, queue, commit-log end) of each write of consume-queue entries,
        # for the serving thread to look at only those queues' held pulls
        # (written by the store's writer: the serving thread, or a slave's
        # replication thread)
        self.appended: collections.deque[tuple[str, int, int]] = collections.deque()
        self.recovery: RecoveryReport | None = None
        self._cq_lock = threading.Lock()   # queues dict: serving thread vs. checkpoint
        # one checkpoint at a time, and none while the log is cut: the
        # checkpoint thread's offset, read before a cut, must not be written
        # after it (nor two writers race on one temporary file)
        self._checkpoint_lock = threading.RLock()
        self._checkpointed = -1
        self._last_thorough_ms = -math.inf   # monotonic: when a checkpoint last flushed every queue
        self.messages_stored = 0
        # idempotent producers' sequences, as the log holds them (snapshotted
        # with the checkpoint, at most every PRODUCER_SNAPSHOT_S)
        self.producers = ProducerStates()
        self.producer_state_path = os.path.join(root, "producer_state.json")
        self._snapshot_at = -PRODUCER_SNAPSHOT_S
        self._snapshot_offset = -1             # the offset the last snapshot was taken at
        # its parts, and their calls as the store's
        self.writes = writes = StoreWrites(self)
        self.reads = reads = StoreReads(self)
        self.reput = reput = Reput(self)
        self.put_batch, self.put_records = writes.put_batch, writes.put_records
        self.append_raw = writes.append_raw
        self.read_raw, self.get_messages = reads.read_raw, reads.get_messages
        self.read_record, self.query_by_key = reads.read_record, reads.query_by_key
        self.store_timestamp, self.offset_by_time = reads.store_timestamp, reads.offset_by_time
        self.physical_at = reads.physical_at
        self.visible_max_offset = StoreReads.visible_max_offset
        self.dispatch, self.check_dispatch = reput.dispatch, reput.check_dispatch
        self.write_dispatch = reput.write_dispatch

    @property
    def owner(self) -> int | None:
        return self.writer.owner

    def adopt(self) -> None:
        """The calling thread writes this store from now on (``one_writer``)."""
        self.writer.adopt()

    def hand_over(self, ident: int) -> None:
        """The thread ``ident`` writes this store from now on (``one_writer``)."""
        self.writer.hand_over(ident)

    @property
    def cannot_write(self) -> str:
        """Why the last write failed (a full disk, since when); "": it did not."""
        return self.writes.cannot_write

    def start(self) -> RecoveryReport:
        self.adopt()           # this thread is the store's one writer (``one_writer``)
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
        self.observe_sequenced(sequenced)
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
        self.writes.finish_unfinished()
        self.commitlog.flush()
        self.checkpoint(final=True)
        self._close_files()

    def _close_files(self) -> None:
        for cq in list(self.queues.values()):
            cq.close()
        self.index.close()
        self.commitlog.close()

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

    def truncate_to(self, offset: int) -> tuple[int, int]:
        """Cut the log at ``offset`` (a record boundary shared with the new
        master): commit log, consume queues, checkpoint. Returns the bytes and
        records removed. Only while nothing else writes or reads the store
        (but the checkpoint thread, which it waits for)."""
        self.writer.check("a cut of the log")
        with self._checkpoint_lock:
            return self._truncate_to(offset)

    def _truncate_to(self, offset: int) -> tuple[int, int]:
        end = self.commitlog.max_offset
        if offset >= end:
            return 0, 0
        records = 0
        self.fresh = None
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

    def checkpoint(self, thorough: bool = True, final: bool = False) -> int:
        """Flush consume queues and record the offset recovery may start from:
        the lower of the flushed commit log, the dispatched consume queues and
        the first entry of any queue left unflushed. Not ``thorough`` (the
        periodic checkpoint, but every ``cq_flush_thorough_interval_ms``), a
        queue is flushed only with ``cq_flush_least_pages`` of entries
        written, as RocketMQ's flushConsumeQueueLeastPages: 10,000 queues
        each written a little would be 10,000 fdatasyncs a second."""
        with self._checkpoint_lock:
            return self._checkpoint(thorough, final)

    def _checkpoint(self, thorough: bool, final: bool) -> int:
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

    def observe_sequenced(self, sequenced: list[int], checked: bool = False) -> None:
        """Idempotent batches' first records, stored or dispatched: their
        producers' sequences. ``checked``: the records were checked moments
        ago on this thread (a dispatch's scan), and are read as they lie (a
        slave's second check of each was ~5% of its CPU a message)."""
        read = self.commitlog.record_at if checked else self.read_record
        for phys in sequenced:
            wrong = self.producers.observe_record(read(phys), phys)
            if wrong:
                log.warning("an idempotent batch's sequence is not readable (%s): a retry of "
                            "it may be stored again", wrong)

    def delete_expired(self, reserved_hours: float, min_consumed_phys: int | None,
                       now_s: float | None = None) -> int:
        """Delete expired commit-log segments and consume-queue entries below
        them (holding the queues against the checkpoint thread)."""
        self.writer.check("retention")
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
