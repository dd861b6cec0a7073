"""The timer service on a real store, in process, its clock given: the
interleavings a broker's loop does not choose (a recall against a timer
the wheel already fired, with the wall clock stepped back; a recall and
the firing in one turn)."""

import time

import pytest

from duomq.broker.metrics import BrokerMetrics
from duomq.common.config import BrokerConfig
from duomq.common.errors import BadRequestError
from duomq.common.message import decode_records
from duomq.format import record as rec
from duomq.format.record import parse_msg_id_epoch
from duomq.master import requeue
from duomq.master.timers import TimerService
from duomq.store import MessageStore
from duomq.store.consumer_offsets import ConsumerOffsetManager
from duomq.timer.indexer import TimerIndexer

T0 = int(time.time() * 1000) // 1000 * 1000 + 60_000


@pytest.fixture
def service(tmp_path):
    cfg = BrokerConfig(data_dir=str(tmp_path), segment_size_bytes=1 << 20,
                       max_message_bytes=64 << 10, cq_entries_per_segment=1000)
    store = MessageStore(cfg)
    store.start()
    offsets = ConsumerOffsetManager(str(tmp_path / "offsets.json"))
    ts = TimerService(store, offsets, TimerIndexer.of(cfg), cfg, "broker-a", BrokerMetrics(),
                      now=T0 - 10_000)
    yield ts, store
    ts.indexer.close()
    store.close()


def timer(ts, store, body: bytes, at: int) -> str:
    """A producer's timer stored as the send path stores it: its id."""
    raw = rec.encode_record(b"Orders", b"", b"", rec.encode_properties(
        {"DELIVER_AT": str(at)}), body, T0 - 10_000, rec.NO_HOST)
    msg = decode_records(raw, "broker-a")[0]
    put = store.put_records([requeue.schedule(msg, 0, (1000,), T0 - 10_000)])[0]
    return decode_records(store.read_record(put.physical_offsets[0]), "broker-a")[0].msg_id


def delivered(store) -> list[bytes]:
    cq = store.find_queue("Orders", 0)
    if cq is None:
        return []
    out, off = [], 0
    while True:
        got = store.get_messages("Orders", 0, off, 1000, 8 << 20, store.commitlog.max_offset)
        if not got.count:
            return out
        out += [m.body for m in decode_records(got.records)]
        off = got.next_offset


def test_a_recall_after_the_wheel_fired_is_too_late_even_with_the_clock_stepped_back(service):
    ts, store = service
    msg_id = timer(ts, store, b"a", T0)
    ts.pump(T0 + 5, store.commitlog.max_offset)           # fired
    assert delivered(store) == [b"a"]
    with pytest.raises(BadRequestError, match="too late to recall"):
        ts.recall("Orders", msg_id, T0, T0 - 2000)          # the wall clock went back 2 s


def test_a_recall_in_the_turn_its_timer_comes_due_wins(service):
    ts, store = service
    keep, gone = timer(ts, store, b"keep", T0), timer(ts, store, b"gone", T0)
    topic, qid, record = ts.recall("Orders", gone, T0, T0 - 1)   # 1 ms before it is due
    store.put_records([(topic, qid, record)])
    ts.recalled(parse_msg_id_epoch(gone)[1], T0)
    ts.pump(T0 + 5, store.commitlog.max_offset)           # the recall not indexed yet
    ts.pump(T0 + 10, store.commitlog.max_offset)
    assert delivered(store) == [b"keep"]
    assert keep


def test_a_pump_that_fired_a_full_batch_refuses_to_recall_what_it_fired(service):
    """More timers due in a slot than one pump fires: the wheel's progress
    has not moved past them, yet a recall of any one fired is refused (the
    clock stepped back below them); one not due yet is taken."""
    from duomq.master.timers import BATCH
    ts, store = service
    n = BATCH + 500
    ats = [T0 + i * 900 // n for i in range(n)]
    ids = [timer(ts, store, b"t%d" % i, at) for i, at in enumerate(ats)]
    later = timer(ts, store, b"later", T0 + 5000)
    ts.pump(T0 + 950, store.commitlog.max_offset)        # one batch of them
    fired = delivered(store)
    assert len(fired) == BATCH
    by_body = {b"t%d" % i: (msg_id, at) for i, (msg_id, at) in enumerate(zip(ids, ats, strict=True))}
    for body in fired[::97]:
        msg_id, at = by_body[body]
        with pytest.raises(BadRequestError, match="too late to recall"):
            ts.recall("Orders", msg_id, at, T0 - 1)
    ts.recall("Orders", later, T0 + 5000, T0 - 1)
