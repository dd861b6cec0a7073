"""Recovery after a crash: scan the commit log from a verified start (the
checkpoint, when a record ends there), stop at the first record whose size,
magic, lengths or CRC is wrong, and rebuild consume-queue entries for every
record scanned.

What follows the first bad record decides what it was:
- nothing valid (zeros, or bytes that never check out): a write torn by the
  crash. Nothing past it was ever acknowledged as durable; it is truncated,
  and the report says how far the scan got and what was cut.
- valid records further on: damage in the middle of data written (and
  probably acknowledged) after it. That tail is never destroyed silently: it
  is copied to ``<data_dir>/quarantine/<offset>-<time>/`` with a report, the
  log is cut at the damage so that the store is consistent, and the store
  reports ``damaged``: the broker then refuses to be master until it has
  fetched that range again from its group.
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

from duomq.common.errors import InvalidNameError
from duomq.format import record as rec
from duomq.store.commitlog import CommitLog
from duomq.store.mapped_file_queue import MappedFileQueue

log = logging.getLogger(__name__)


@dataclass
class RecoveryReport:
    start_offset: int
    end_offset: int
    records_scanned: int
    reason: str
    cut_bytes: int = 0               # bytes past end_offset removed from the segments
    damaged_until: int = 0           # damage in the middle: valid data went on to here
    quarantine: str = ""             # ... and was copied there before the cut

    @property
    def truncated(self) -> bool:
        """True when the scan stopped at a damaged record, not at the end of data."""
        return self.reason not in ("end of data", "empty")

    @property
    def damaged(self) -> bool:
        """Valid records followed the damage: acknowledged data may be missing."""
        return bool(self.quarantine)

    def __str__(self):
        text = (f"recovered commit log: scanned {self.records_scanned} records from "
                f"{self.start_offset} to {self.end_offset}; stopped at {self.reason}")
        if self.damaged:
            text += (f"; DAMAGE below data written later: valid records go on to "
                     f"{self.damaged_until}, {self.cut_bytes} bytes from {self.end_offset} "
                     f"were copied to {self.quarantine} and cut; this broker will not be "
                     f"master until it has fetched them again from its group")
        elif self.truncated:
            text += f"; a torn tail of {self.cut_bytes} bytes was cut there"
        return text


# what recovery reads of each record past the checkpoint
_RECOVER = rec.fields("queue_id", "queue_offset", "physical_offset", "store_ts_ms", "flags",
                      "topic_len", "tags_len", "keys_len")
_MAGICS = [struct.pack(">i", m) for m in (rec.RECORD_MAGIC, rec.RECORD_MAGIC_V2)]
SEARCH_BYTES = 8 << 20        # how far past a bad record recovery looks for a good one


def recover(commitlog: CommitLog, checkpoint_offset: int | None, consume_queue,
            index=None, quarantine_root: str | None = None,
            known_after: Callable[[int], int | None] = lambda _pos: None,
            known_end: int = 0, sequenced: list[int] | None = None) -> RecoveryReport:
    """``consume_queue(topic, queue_id)`` returns (creating) the queue to rebuild;
    ``index`` (a KeyIndex) gets the keys of the records scanned;
    ``known_after(pos)`` is the first record past ``pos`` that the consume
    queues know of (None: none), ``known_end`` the end of the last one."""
    mfq = commitlog.mfq
    if not mfq.segments:
        return RecoveryReport(0, 0, 0, "empty")
    start = mfq.min_offset if checkpoint_offset is None else max(checkpoint_offset, mfq.min_offset)
    pos, scanned, reason, keyed = _scan(mfq, start, consume_queue, known_after,
                                        sequenced if sequenced is not None else [])
    report = RecoveryReport(start, pos, scanned, reason)
    if report.truncated:
        after = next_valid(mfq, pos, known_after)
        written = _written_end(mfq, pos, known_end)
        report.cut_bytes = written - pos
        if after is not None:
            report.damaged_until = written
            report.quarantine = _quarantine(mfq, pos, quarantine_root, reason, after)
    mfq.truncate(pos)
    if index is not None:
        index.add(keyed)
    return report


def _scan(mfq: MappedFileQueue, pos: int, consume_queue,
          known_after: Callable[[int], int | None],
          sequenced: list[int]) -> tuple[int, int, str, list]:
    scanned, reason, keyed = 0, "end of data", []
    header = _RECOVER
    while True:
        seg = mfq.find(pos)
        if seg is None:
            break
        rel = pos - seg.base
        if seg.size - rel < rec.BLANK.size:
            pos = seg.end
            continue
        try:
            size = rec.check_record(seg.mm, rel, seg.size)
        except rec.OldFormatError:
            raise                       # not damage: never truncate a log we cannot read
        except rec.RecordError as exc:
            if any(seg.mm[rel:rel + 8]) or next_valid(mfq, pos, known_after) is not None:
                reason = str(exc)
            break
        if size == -1:
            pos = seg.end
            continue
        qid, qoff, phys, stored, flags, lt, lg, lk = header.unpack_from(seg.mm, rel)
        p = rel + rec.HEADER_SIZE
        topic_b = bytes(seg.mm[p:p + lt])
        tags = bytes(seg.mm[p + lt:p + lt + lg])
        if phys != pos:
            reason = f"record at {pos} claims physical offset {phys}"
            break
        try:
            cq = consume_queue(topic_b.decode(), qid)
        except (UnicodeDecodeError, InvalidNameError) as exc:
            reason = f"record at {pos} names a queue the store refuses: {exc}"
            break
        topic = cq.topic
        if qoff > cq.max_offset:
            reason = f"record at {pos} leaves a gap in {topic}/{qid} (offset {qoff})"
            break
        if qoff < cq.max_offset:
            e = cq.entry(qoff)
            if e is not None and e[1] and e[0] != pos:   # size 0: an entry lost in the crash
                reason = f"record at {pos} disagrees with {topic}/{qid} entry {qoff}"
                break
        cq.put_entry(qoff, pos, size, rec.tag_hash(tags))
        if lk:
            k = p + lt + lg
            keyed.append((topic_b, bytes(seg.mm[k:k + lk]), pos, stored))
        if flags & rec.FLAG_SEQUENCED:
            sequenced.append(pos)
        scanned += 1
        pos += size
    return pos, scanned, reason, keyed


def next_valid(mfq: MappedFileQueue, pos: int,
               known_after: Callable[[int], int | None] = lambda _pos: None) -> int | None:
    """The offset of the first record past ``pos`` that checks out, or None.
    Looked for where it costs little at every start: in the next
    ``SEARCH_BYTES`` of ``pos``'s segment, at the first record the consume
    queues know past ``pos``, and at the start of each later segment (a
    segment starts with a record). Never a whole 1 GiB segment of zeros."""
    seg = mfq.find(pos)
    if seg is None:
        return None
    mm, rel = seg.mm, pos - seg.base
    limit = min(seg.size, rel + SEARCH_BYTES)
    for magic in _MAGICS:
        at = rel + 5                               # a magic at least one byte past pos
        while True:
            j = mm.find(magic, at, limit)
            if j < 0:
                break
            if _checks(mm, j - 4, seg.size):
                return seg.base + j - 4
            at = j + 1
    known = known_after(pos)
    if known is not None:
        kseg = mfq.find(known)
        if kseg is not None and _checks(kseg.mm, known - kseg.base, kseg.size):
            return known
    for later in mfq.segments:
        if later.base > seg.base and _checks(later.mm, 0, later.size):
            return later.base
    return None


def _checks(buf, pos: int, limit: int) -> bool:
    try:
        return rec.check_record(buf, pos, limit) > 0
    except rec.RecordError:
        return False


def _written_end(mfq: MappedFileQueue, pos: int, known_end: int) -> int:
    """About where the data from ``pos`` ends (for the report): from the end
    the consume queues know, forward a MiB at a time to the first all-zero
    MiB, looking at most ``SEARCH_BYTES`` (never a whole segment of zeros)."""
    at = max(pos, known_end)
    seg = mfq.find(at)
    if seg is None:
        return at
    rel = at - seg.base
    limit = min(seg.size, rel + SEARCH_BYTES)
    while rel < limit:
        part = seg.mm[rel:min(limit, rel + (1 << 20))]
        used = len(part.rstrip(b"\0"))
        if used < len(part):
            return seg.base + rel + used
        rel += len(part)
    return seg.base + rel


def _quarantine(mfq: MappedFileQueue, pos: int, root: str | None, reason: str,
                next_record: int) -> str:
    """Copy the log from ``pos`` on into a new directory under ``root``; its
    path. Raises OSError (the broker then does not start, and cuts nothing)
    when the copy cannot be made."""
    if root is None:
        raise OSError(f"commit-log damage at {pos} with valid records after it, and no "
                      f"quarantine directory to keep them in")
    where = os.path.join(root, f"{pos:020d}-{int(time.time())}")
    os.makedirs(where)
    for seg in mfq.segments:
        if seg.end <= pos:
            continue
        target = os.path.join(where, os.path.basename(seg.path))
        if seg.base >= pos:
            shutil.copyfile(seg.path, target)
        else:
            with open(target, "wb") as out:
                out.write(seg.mm[pos - seg.base:])
    with open(os.path.join(where, "REPORT.txt"), "w") as f:
        f.write(f"commit-log damage found by recovery at offset {pos}: {reason}\n"
                f"the next record that checks out is at {next_record}\n"
                f"files: each later segment whole (named by its base offset); the segment\n"
                f"holding the damage from offset {pos} on, under its own name\n")
        f.flush()
        os.fsync(f.fileno())
    log.error("commit-log damage at %d (%s) with valid records from %d on: copied the log "
              "from %d to %s before cutting it", pos, reason, next_record, pos, where)
    return where
