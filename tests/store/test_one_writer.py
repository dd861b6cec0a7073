"""A store has one writer (issue 68): the thread that started it. A write
from any other thread (a producer's batch, a replicated chunk, consume-queue
entries, a cut, retention) is refused before it changes anything, so that a
second writer is a loud bug, not a race. Real parts: a store on disk."""

import threading

import pytest

from duomq.common.config import BrokerConfig
from duomq.format import record as rec
from duomq.store import MessageStore
from duomq.store.one_writer import NotTheWriter


def record(topic: bytes, queue_id: int, phys: int) -> bytes:
    buf = bytearray(rec.encode_record(topic, b"", b"", b"", b"payload", 1))
    rec.PATCH.pack_into(buf, rec.PATCH_OFFSET, queue_id, 0, phys, 1, 2)
    rec.seal(buf, 0)
    return bytes(buf)


def on_another_thread(fn):
    """What ``fn`` raised on a thread of its own (None: nothing)."""
    out = []

    def run():
        try:
            fn()
            out.append(None)
        except BaseException as exc:      # noqa: BLE001 - handed back to the test
            out.append(exc)
    t = threading.Thread(target=run, name="intruder")
    t.start()
    t.join(10)
    return out[0]


@pytest.fixture
def store(tmp_path):
    s = MessageStore(BrokerConfig(data_dir=str(tmp_path / "d"), segment_size_bytes=1 << 16,
                                  max_message_bytes=4096, cq_entries_per_segment=64))
    s.start()
    s.put_batch("T", 0, bytearray(rec.encode_record(b"T", b"", b"", b"", b"mine", 1)), 1)
    yield s
    s.close()


WRITES = {
    "a write": lambda s: s.put_batch(
        "T", 0, bytearray(rec.encode_record(b"T", b"", b"", b"", b"theirs", 1)), 1),
    "a replicated chunk": lambda s: s.append_raw(s.commitlog.max_offset,
                                                 record(b"T", 0, s.commitlog.max_offset)),
    "consume-queue entries": lambda s: s.dispatch(),
    "a cut of the log": lambda s: s.truncate_to(0),
    "retention": lambda s: s.delete_expired(0.0, None, now_s=1e12),
}


@pytest.mark.parametrize("what", sorted(WRITES))
def test_a_write_from_another_thread_is_refused_and_changes_nothing(store, what):
    end, queue = store.commitlog.max_offset, store.find_queue("T", 0).max_offset
    dispatched = store.dispatched_offset
    exc = on_another_thread(lambda: WRITES[what](store))
    assert isinstance(exc, NotTheWriter), exc
    assert str(exc).startswith(f"{what} from thread 'intruder'")
    assert (store.commitlog.max_offset, store.find_queue("T", 0).max_offset,
            store.dispatched_offset) == (end, queue, dispatched)
    # the writer's own thread goes on writing
    store.put_batch("T", 0, bytearray(rec.encode_record(b"T", b"", b"", b"", b"more", 1)), 1)
    assert store.find_queue("T", 0).max_offset == queue + 1


def test_a_thread_that_adopts_the_store_is_its_writer_from_then_on(store):
    def handed_over():
        store.adopt()
        WRITES["a write"](store)
    assert on_another_thread(handed_over) is None
    assert store.find_queue("T", 0).max_offset == 2
    with pytest.raises(NotTheWriter):          # and the thread that started it no longer is
        WRITES["a write"](store)
    store.adopt()
