"""The master's write path of the store: a producer's batch checked, placed,
sealed and written (``put_batch``), records the broker writes again
(``put_records``), and a slave's byte-identical append of the master's log
(``append_raw``). A part of ``MessageStore``; the store's one writer calls it
(``one_writer``: the serving thread as master, the replication thread as
slave)."""

from __future__ import annotations

import errno
import itertools
import logging
import operator
import time
from dataclasses import dataclass
from typing import Any

from duomq.common.errors import StoreFullError
from duomq.format import bulk_scan, native, seal
from duomq.format import record as rec
from duomq.format.crc import crc32c
from duomq.store.consume_queue import CQ_UNIT, ConsumeQueue, pack_entries
from duomq.store.producer_state import Batch
from duomq.store.view import Fresh, StorePart, StoreView

log = logging.getLogger(__name__)
_FLAGS = rec.fields("flags")


@dataclass(slots=True, eq=False)
class SecondHalf:
    """What a ``put_batch(later=True)`` left for after the send's ack: its
    queue entries, its keys, its producer's sequence and the offsets
    published (``StoreWrites._stored``). ``fresh`` is the batch as ``Fresh``
    will describe it once finished and ``first_offset`` its first record's
    commit-log offset: what a pull of exactly it is answered with before
    (``processors.pull_staged``). ``finish`` writes it, once, on the store's
    writer; the serving loop's answer book (``broker.answers``) calls it
    before the next request is served, and the store's next write first."""
    store: StoreWrites
    cq: ConsumeQueue
    entries: bytes
    fresh: Fresh
    topic_b: bytes
    numbering: tuple[int, int, int] | None
    offsets: list[int]
    keyed: list[tuple[int, int, int]]
    now: int
    done: bool = False

    @property
    def first_offset(self) -> int:
        return self.offsets[0]

    def finish(self) -> None:
        if not self.done:
            self.store._finish(self)


@dataclass(slots=True)
class PutResult:
    queue_offset: int              # queue offset of the first record
    physical_offsets: list[int]    # commit-log offset of each record
    end_offset: int                # commit-log offset just past the batch
    rest: SecondHalf | None = None  # put_batch(later=True): what is left to write
    stored_ms: int = 0             # the store time its records carry (epoch ms)


class StoreWrites(StorePart):
    """The store's write path, composed into ``MessageStore`` (which names
    its public calls): the store's parts it writes are kept here by
    reference, the offsets it moves are the store's."""

    def __init__(self, store: StoreView) -> None:
        super().__init__(store)
        self.full_logged = -60.0       # monotonic: when a full disk was last logged
        self.cannot_write = ""         # why the last write failed (a full disk); "": it did not
        # a second half not written yet (``put_batch(later=True)``): the next write finishes it
        self.unfinished: SecondHalf | None = None

    def finish_unfinished(self) -> None:
        """Write what a ``put_batch(later=True)`` left, if anything (the store's close)."""
        if self.unfinished is not None:
            self.unfinished.finish()

    def put_batch(self, topic: str, queue_id: int, buf: bytearray, count: int,
                  numbering: tuple[int, int, int] | None = None,
                  later: bool = False) -> PutResult:
        """Validate, place, patch and write a producer's batch (one commit-log
        write per segment touched, one consume-queue write). Raises
        RecordError / RecordTooLargeError, or StoreFullError when the disk has
        no room for a file it needs, with nothing stored. ``numbering``: an
        idempotent batch's ``(producer id, sequence, count)`` as the SEND
        handler read it (else a flagged first record is read here).

        ``later``: the common case (a batch that fits the open segment)
        returns once its records are in the commit log, and what follows
        (its queue entries, its keys, its producer's sequence, the offsets
        published) is the result's ``rest`` (``SecondHalf``), whose
        ``finish`` the caller must call before anything else reads the
        store (the serving loop: after the send's ack, before it serves the
        next request; issue 41); the next write finishes it first. RocketMQ
        builds its queues from the log after the ack too (its reput)."""
        self.writer.check("a write")
        if self.unfinished is not None:
            self.unfinished.finish()
        try:
            put = self._put_batch(topic, queue_id, buf, count, numbering, later)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            raise self._full(exc) from None
        if self.cannot_write:
            self.cannot_write = ""
        return put

    def _full(self, exc: OSError) -> StoreFullError:
        """The error for a write a full disk refused, logged at most once a minute."""
        cfg = self.config
        text = (f"broker {cfg.group}/{cfg.broker_id} cannot store: {exc.strerror or exc}; "
                f"nothing was stored")
        now = time.monotonic()
        if now - self.full_logged >= 60.0:
            self.full_logged = now
            log.warning("%s (logged once a minute while the disk stays full)", text)
        self.cannot_write = f"{exc.strerror or 'no space left on the device'} (since " \
            f"{time.strftime('%H:%M:%S')})" if not self.cannot_write else self.cannot_write
        return StoreFullError(exc.errno or errno.ENOSPC, text)

    def _put_batch(self, topic: str, queue_id: int, buf: bytearray, count: int,
                   numbering: tuple[int, int, int] | None, later: bool) -> PutResult:
        topic_b = topic.encode()
        staged = self._put_staged(topic, topic_b, queue_id, buf, count, numbering, later)
        if staged is not None:
            return staged
        crcs: list[int] = []
        bulk = bulk_scan.pays(count)
        scanned = bulk_scan.scan(buf, topic_b, self.config.max_message_bytes, count, crcs) \
            if bulk else None
        bounds, borns, hashes, keyed = scanned or rec.scan_batch(
            buf, topic_b, self.config.max_message_bytes, count, crcs)
        sizes = list(map(operator.sub, bounds[1:], bounds))
        offsets, plan = self.commitlog.place(sizes)
        cq = self.store.consume_queue(topic, queue_id)
        qoff = cq.max_offset
        now = time.time_ns() // 1_000_000
        if bulk:
            seal.patch_and_seal(buf, bounds, queue_id, qoff, offsets, now, self.store.epoch)
        else:
            patch, at = rec.PATCH.pack_into, rec.PATCH_OFFSET
            crc_of, set_crc, ca = crc32c, rec.CRC.pack_into, rec.CRC_OFFSET
            mv, hs = memoryview(buf), rec.HEADER_SIZE
            stamp, ea = rec.epoch_stamp(self.store.epoch), rec.EPOCH_AT
            for qo, start, phys, born, c in zip(itertools.count(qoff), bounds, offsets, borns,
                                                crcs):
                patch(buf, start + at, queue_id, qo, phys, born, now)
                buf[start + ea:start + ea + 3] = stamp
                # seal: the stored crc covers the patched header, continued from the payload's
                set_crc(buf, start + ca, crc_of(mv[start + at:start + hs], c))
        flat = [0] * (3 * count)   # [phys, size, tag hash] per entry, interleaved in C
        flat[0::3], flat[1::3], flat[2::3] = offsets, sizes, hashes
        last_cq = cq.mfq.last()
        if last_cq is None or (qoff + count) * CQ_UNIT.size > last_cq.end:
            cq.reserve(qoff, count)            # a full disk fails here, with nothing written
        self.commitlog.write(buf, bounds, plan)
        cq.append(pack_entries(flat, count), qoff)
        end = offsets[-1] + sizes[-1]
        self._stored(topic, topic_b, queue_id, buf, count, numbering, qoff, offsets, end, keyed,
                     now)
        return PutResult(qoff, offsets, end, stored_ms=now)

    def _put_staged(self, topic: str, topic_b: bytes, queue_id: int, buf: bytearray,
                    count: int, numbering: tuple[int, int, int] | None,
                    later: bool) -> PutResult | None:
        """The common case in one C call (``_native.stage``: checked, sealed,
        the queue entries packed): a batch that fits the open segment. None,
        with nothing changed, for any other (no C loops, a segment to roll,
        anything the checks refuse): ``_put_batch``'s own path then."""
        seg = self.commitlog.open_room(len(buf))
        if seg is None:
            return None
        cq = self.store.consume_queue(topic, queue_id)
        qoff = cq.max_offset
        now = time.time_ns() // 1_000_000
        staged = _stage(buf, topic_b, self.config.max_message_bytes, count, queue_id, qoff,
                             seg.base + seg.wrote, now, self.store.epoch)
        if staged is None:
            return None
        offsets, entries, keyed = staged
        last_cq = cq.mfq.last()
        if last_cq is None or (qoff + count) * CQ_UNIT.size > last_cq.end:
            cq.reserve(qoff, count)            # a full disk fails here, with nothing written
        self.commitlog.append_to(seg, buf)
        end = seg.base + seg.wrote
        if later:
            rest = self.unfinished = SecondHalf(
                self, cq, entries, Fresh(topic, queue_id, qoff, count, buf, end), topic_b,
                numbering, offsets, keyed, now)
            return PutResult(qoff, offsets, end, rest, now)
        cq.append(entries, qoff)
        self._stored(topic, topic_b, queue_id, buf, count, numbering, qoff, offsets, end, keyed,
                     now)
        return PutResult(qoff, offsets, end, stored_ms=now)

    def _finish(self, rest: SecondHalf) -> None:
        """``SecondHalf.finish``: its queue entries written (into space
        reserved before the records were written) and the rest of
        ``_stored``."""
        self.writer.check("a send's queue entries")
        rest.done = True
        if self.unfinished is rest:
            self.unfinished = None
        fresh = rest.fresh
        topic, queue_id, qoff = fresh.topic, fresh.queue_id, fresh.queue_offset
        try:
            rest.cq.append(rest.entries, qoff)
        except BaseException:
            # acked and in the log: what follows it is rebuilt from the log at
            # the next start (recovery replays it from the last checkpoint,
            # which never passes the dispatched offset this write left behind)
            log.critical("the queue entries of %s/%d from offset %d, acked, could not be "
                         "written: the broker stops; a restart rebuilds them from the commit "
                         "log", topic, queue_id, qoff)
            raise
        self._stored(topic, rest.topic_b, queue_id, fresh.records, fresh.count, rest.numbering,
                     qoff, rest.offsets, fresh.end, rest.keyed, rest.now, fresh)

    def _stored(self, topic: str, topic_b: bytes, queue_id: int, buf: bytearray, count: int,
                numbering: tuple[int, int, int] | None, qoff: int, offsets: list[int],
                end: int, keyed: list[tuple[int, int, int]], now: int,
                fresh: Fresh | None = None) -> None:
        """What follows a batch's writes: its keys indexed, an idempotent
        batch observed, the queue and offsets published."""
        if keyed:
            self.index.add_batch(topic_b, [bytes(buf[p:p + n]) for _i, p, n in keyed],
                                 [offsets[i] for i, _p, _n in keyed], now)
        if numbering is not None:                                # an idempotent batch
            pid, seq, n = numbering
            self.producers.observe(pid, topic, queue_id, Batch(seq, qoff, n, offsets[0]))
        elif _FLAGS.unpack_from(buf, 0)[0] & rec.FLAG_SEQUENCED:
            self.producers.observe_record(memoryview(buf), offsets[0])
        self.appended.append((topic, queue_id, end))
        self.store.fresh = fresh or Fresh(topic, queue_id, qoff, count, buf, end)
        self.store.dispatched_offset = end
        self.store.messages_stored += count

    def put_records(self, items: list[tuple[str, int, bytes]]) -> list[PutResult]:
        """Store records the broker writes again (delayed, due, sent back),
        ``(topic, queue_id, record)`` in order: one ``put_batch`` per run of
        records bound for the same queue. Returns the PutResult of each run."""
        out = []
        for (topic, qid), run in itertools.groupby(items, key=lambda t: t[:2]):
            records = [r for _t, _q, r in run]
            out.append(self.put_batch(topic, qid, bytearray(b"".join(records)), len(records)))
        return out

    def append_raw(self, offset: int, data) -> int:
        """A slave's write: the master's bytes at the same offset (byte-identical
        logs). ``offset`` must be this log's end. Returns the new end."""
        self.writer.check("a replicated chunk")
        end = self.commitlog.max_offset
        if offset != end:
            raise ValueError(f"replicated chunk at {offset} but the log ends at {end}")
        self.store.fresh = None
        mfq = self.commitlog.mfq
        view = memoryview(data)
        pos = offset
        try:
            while view:
                seg = mfq.ensure(pos)
                rel = pos - seg.base
                n = min(len(view), seg.size - rel)
                seg.write(view[:n], rel)
                seg.wrote = rel + n
                view = view[n:]
                pos += n
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise self._full(exc) from None
            raise
        if self.cannot_write:
            self.cannot_write = ""
        return pos


_stage: Any = native.declined     # bound by _bind: the C loops' stage, or declining all


@native.chosen
def _bind(loops: Any) -> None:
    global _stage
    _stage = loops.stage if loops is not None else native.declined
