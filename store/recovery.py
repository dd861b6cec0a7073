"""Recovery after a crash: scan the commit log from the checkpoint, stop at the
first record whose size, magic, lengths or CRC is wrong, truncate there, and
rebuild consume-queue entries for every record past the checkpoint."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from duomq.common.errors import InvalidNameError
from duomq.format import record as rec
from duomq.store.commitlog import CommitLog

log = logging.getLogger(__name__)


@dataclass
class RecoveryReport:
    start_offset: int
    end_offset: int
    records_scanned: int
    reason: str

    @property
    def truncated(self) -> bool:
        """True when the scan stopped at a damaged record, not at the end of data."""
        return self.reason not in ("end of data", "empty")

    def __str__(self):
        return (f"recovered commit log: scanned {self.records_scanned} records from "
                f"{self.start_offset} to {self.end_offset}; stopped at {self.reason}"
                + ("; truncated there" if self.truncated else ""))


# what recovery reads of each record past the checkpoint
_RECOVER = rec.fields("queue_id", "queue_offset", "physical_offset", "store_ts_ms", "topic_len",
                      "tags_len", "keys_len")

def recover(commitlog: CommitLog, checkpoint_offset: int | None, consume_queue,
            index=None) -> RecoveryReport:
    """``consume_queue(topic, queue_id)`` returns (creating) the queue to rebuild;
    ``index`` (a KeyIndex) gets the keys of the records scanned."""
    mfq = commitlog.mfq
    if not mfq.segments:
        return RecoveryReport(0, 0, 0, "empty")
    start = mfq.min_offset if checkpoint_offset is None else max(checkpoint_offset, mfq.min_offset)
    pos = start
    scanned = 0
    reason = "end of data"
    header = _RECOVER
    keyed = []
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
            if any(seg.mm[rel:rel + 8]):
                reason = str(exc)
            break
        if size == -1:
            pos = seg.end
            continue
        qid, qoff, phys, stored, lt, lg, lk = header.unpack_from(seg.mm, rel)
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
        scanned += 1
        pos += size
    mfq.truncate(pos)
    if index is not None:
        index.add(keyed)
    return RecoveryReport(start, pos, scanned, reason)
