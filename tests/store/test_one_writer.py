"""A store has one writer (issue 68): the thread that started it. A write
from any other thread (a producer's batch, a replicated chunk, consume-queue
entries, a deferred send's entries, a cut, retention, a hand-over) is refused
before it changes anything, so that a second writer is a loud bug, not a
race. Real parts: a store on disk."""

import threading
import time

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


def test_a_deferred_sends_second_half_is_written_by_the_writer_only(store, c_loops):
    """``put_batch(later=True)`` leaves its queue entries owed (the
    result's ``rest``); its ``finish`` from another thread is refused and
    leaves them owed, and the writer's own finish writes them, once (a
    finish of what is written writes nothing, so any thread may call it)."""
    queue = store.find_queue("T", 0).max_offset
    rest = store.put_batch("T", 0, bytearray(rec.encode_record(b"T", b"", b"", b"", b"late", 1)),
                           1, later=True).rest
    assert rest is not None and not rest.done
    exc = on_another_thread(rest.finish)
    assert isinstance(exc, NotTheWriter), exc
    assert str(exc).startswith("a send's queue entries from thread 'intruder'")
    assert not rest.done and store.find_queue("T", 0).max_offset == queue
    rest.finish()
    assert rest.done and store.find_queue("T", 0).max_offset == queue + 1
    rest.finish()
    assert store.find_queue("T", 0).max_offset == queue + 1
    assert on_another_thread(rest.finish) is None


def test_the_next_write_finishes_a_second_half_left_owed(store, c_loops):
    """A write after a ``put_batch(later=True)`` whose rest nobody finished
    writes that rest first: the queue's offsets stay in order."""
    queue = store.find_queue("T", 0).max_offset
    first = store.put_batch("T", 0, bytearray(rec.encode_record(b"T", b"", b"", b"", b"a", 1)),
                            1, later=True)
    second = store.put_batch("T", 0, bytearray(rec.encode_record(b"T", b"", b"", b"", b"b", 1)),
                             1)
    assert first.rest is not None and first.rest.done
    assert (first.queue_offset, second.queue_offset) == (queue, queue + 1)
    assert store.find_queue("T", 0).max_offset == queue + 2


def test_a_thread_that_adopts_the_store_is_its_writer_from_then_on(store):
    def handed_over():
        store.adopt()
        WRITES["a write"](store)
    assert on_another_thread(handed_over) is None
    assert store.find_queue("T", 0).max_offset == 2
    with pytest.raises(NotTheWriter):          # and the thread that started it no longer is
        WRITES["a write"](store)
    store.adopt()


def test_only_the_writer_hands_the_store_over(store):
    mine = threading.get_ident()
    exc = on_another_thread(lambda: store.hand_over(threading.get_ident()))
    assert isinstance(exc, NotTheWriter) and str(exc).startswith("a hand-over from thread")
    assert store.owner == mine
    got = []

    def take_and_give_back():
        store.adopt()
        WRITES["a write"](store)
        store.hand_over(mine)
        got.append(on_another_thread(lambda: None))
    assert on_another_thread(take_and_give_back) is None
    assert store.owner == mine and store.find_queue("T", 0).max_offset == 2
    store.put_batch("T", 0, bytearray(rec.encode_record(b"T", b"", b"", b"", b"again", 1)), 1)


def test_no_write_posted_to_a_replication_thread_is_lost_while_it_ends(store, monkeypatch):
    """Force the interleaving: the serving thread posts a write
    (``SlaveParts.on_writer``) when the replication thread has done its
    last posted jobs and is about to hand the store back. The post waits
    for the hand-over and the serving thread does the write itself, on the
    store it then owns; a write posted before is done by the replication
    thread as its writer. Nothing posted is dropped (it was, when the
    thread's end was checked before posting)."""
    from duomq.replication.ha_client import HAClient
    from duomq.slave.parts import SlaveParts

    client = HAClient(store, store.config, lambda: None, lambda _c: None, epoch=1)
    parts = SlaveParts(client, 1)
    ran = []
    handing_over = threading.Event()
    real_hand_over = store.hand_over

    def slow_hand_over(ident):       # the window between the last drain and the hand-over
        handing_over.set()
        time.sleep(0.3)
        ran.append("handed over")
        real_hand_over(ident)
    monkeypatch.setattr(store, "hand_over", slow_hand_over)

    def job(name):
        def write():
            ran.append((name, threading.current_thread().name,
                        store.owner == threading.get_ident()))
            WRITES["a write"](store)
        return write
    assert client.post(job("before"))
    client._stopped.set()            # the thread ends at once: "before" is its last drain's
    t = threading.Thread(target=client.run, name="replication")
    t.start()
    assert handing_over.wait(10)
    parts.on_writer(job("during"))   # this (the serving) thread, in the window
    t.join(10)
    assert ran == [("before", "replication", True), "handed over",
                   ("during", threading.current_thread().name, True)], ran
    assert client.ended and not client.post(job("after"))   # the caller does it itself
    parts.on_writer(job("after"))
    assert ran[-1] == ("after", threading.current_thread().name, True)
    assert store.find_queue("T", 0).max_offset == 4
