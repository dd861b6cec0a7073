"""SYNC_FLUSH's group commit, run by the serving thread itself when nothing
else waits (``flush_inline``) or by the group-commit thread: either way a
send is acked only once an fdatasync covered it."""

import threading

from duomq.common.config import BrokerConfig
from duomq.flush.services import INLINE_MAX_S, GroupCommitService
from duomq.format import record as rec
from duomq.store import MessageStore


def _store(tmp_path) -> MessageStore:
    s = MessageStore(BrokerConfig(data_dir=str(tmp_path), segment_size_bytes=1 << 16,
                                  max_message_bytes=4096, max_pull_bytes=1 << 16))
    s.start()
    return s


def _put(s: MessageStore, body: bytes) -> int:
    r = rec.encode_record(b"T", b"", b"", b"", body, 1)
    return s.put_batch("T", 0, bytearray(r), 1).end_offset


def test_the_serving_thread_flushes_inline_and_is_told_what_is_on_disk(tmp_path):
    s = _store(tmp_path)
    seen: list[float] = []
    gc = GroupCommitService(s.commitlog, on_flushed=lambda off: None, observe=seen.append)
    end = _put(s, b"one")
    assert s.commitlog.mfq.flushed_offset() < end
    assert gc.flush_inline() == end == s.commitlog.mfq.flushed_offset()
    assert gc.syncs == 1 and len(seen) == 1 and gc.last_s == seen[0]
    s.close()


def test_inline_gives_way_to_a_sync_under_way_a_slow_disk_and_injected_delays(tmp_path):
    s = _store(tmp_path)
    gc = GroupCommitService(s.commitlog, on_flushed=lambda off: None)
    end = _put(s, b"two")
    with s.commitlog.mfq._flush_lock:          # the group-commit thread is syncing
        assert gc.flush_inline() is None
    assert s.commitlog.mfq.flushed_offset() < end      # nothing claimed, nothing flushed
    gc.last_s = INLINE_MAX_S * 2                       # the last sync was slow
    assert gc.flush_inline() is None
    gc.last_s, gc.fault_delay_s = 0.0, 0.5             # DUOMQ_FAULT_FLUSH_DELAY_MS
    assert gc.flush_inline() is None
    assert gc.syncs == 0
    gc.fault_delay_s = 0.0
    assert gc.flush_inline() == end
    s.close()


def test_the_group_commit_thread_flushes_what_the_serving_thread_left(tmp_path):
    s = _store(tmp_path)
    flushed: list[int] = []
    done = threading.Event()

    def on_flushed(off: int) -> None:
        flushed.append(off)
        done.set()
    gc = GroupCommitService(s.commitlog, on_flushed=on_flushed)
    gc.start()
    try:
        end = _put(s, b"three")
        gc.wakeup()
        assert done.wait(5) and flushed[0] == end == s.commitlog.mfq.flushed_offset()
        assert gc.flush_inline() == end                # nothing left: no sync needed
    finally:
        gc.shutdown()
        s.close()
