"""A topic name and a queue id become directories of the store: whatever path
a record comes through (a send, the schedule service's ``REAL_TOPIC``, a
replicated chunk, the directories found at start), the store never creates a
file outside its data directory."""

import logging
import os

import pytest
import zmq

from duomq.common import delay as d
from duomq.common.config import BrokerConfig
from duomq.common.errors import InvalidNameError
from duomq.common.names import MAX_QUEUES, validate_name, validate_queue
from duomq.format import record as rec
from duomq.master.schedule import ScheduleService
from duomq.proto import pb
from duomq.replication.ha_client import HAClient, ReplicationHalted
from duomq.store import MessageStore
from duomq.store.consumer_offsets import ConsumerOffsetManager

BAD_QUEUES = [("../../escape", 0), ("/abs/path", 0), ("..", 0), ("a/b", 0), ("", 0),
              ("T", -1), ("T", MAX_QUEUES), ("x" * 128, 0)]


def files_under(root) -> set[str]:
    return {os.path.join(d_, f) for d_, _dirs, files in os.walk(root) for f in files}


def small(path) -> BrokerConfig:
    return BrokerConfig(data_dir=str(path), segment_size_bytes=1 << 16, max_message_bytes=4096,
                        max_pull_bytes=1 << 16, cq_entries_per_segment=64)


@pytest.mark.parametrize("topic,qid", BAD_QUEUES)
def test_the_store_refuses_a_queue_that_is_not_a_name(tmp_path, topic, qid):
    store = MessageStore(small(tmp_path / "data"))
    store.start()
    before = files_under(tmp_path)
    record = rec.encode_record(topic.encode(), b"", b"", b"", b"body", 1)
    with pytest.raises(InvalidNameError):
        store.put_batch(topic, qid, bytearray(record), 1)
    assert files_under(tmp_path) == before and store.commitlog.max_offset == 0
    store.close()


def test_internal_topics_are_the_brokers_own():
    with pytest.raises(InvalidNameError, match="reserved for the broker's own use"):
        validate_name("topic", d.SCHEDULE_TOPIC, allow_system=True)
    validate_queue(d.SCHEDULE_TOPIC, 17)
    validate_queue("%RETRY%g", 0)


def test_a_due_message_naming_a_path_stays_in_the_schedule_topic(tmp_path, caplog):
    store = MessageStore(small(tmp_path / "data"))
    store.start()
    offsets = ConsumerOffsetManager(str(tmp_path / "data" / "offsets.json"))
    levels = (1000,)
    for real in ("/abs/path", "../../..", "T"):
        props = rec.encode_properties({d.REAL_TOPIC: real, d.REAL_QID: "0", d.DELAY: "1"})
        store.put_batch(d.SCHEDULE_TOPIC, 0, bytearray(rec.encode_record(
            d.SCHEDULE_TOPIC.encode(), b"", b"", props, real.encode(), 1)), 1)
    before = files_under(tmp_path)
    service = ScheduleService(store, offsets, levels, "broker-a")
    with caplog.at_level(logging.ERROR):
        written = service.pump(1 << 62, store.commitlog.max_offset)
    assert written == 1                                   # only the one for topic T
    assert store.find_queue("T", 0) is not None
    assert {f for f in files_under(tmp_path) - before if "consumequeue" in f} == \
        {str(tmp_path / "data" / "consumequeue" / "T" / "0" / ("0" * 20))}
    assert not os.path.exists(tmp_path / "abs") and not os.path.exists("/abs/path")
    assert caplog.text.count("cannot be delivered and stays in SCHEDULE_TOPIC_XXXX") == 2
    store.close()


def stored(topic: bytes, queue_id: int, phys: int) -> bytes:
    """A record as a master stores it (broker fields patched), whatever its topic."""
    buf = bytearray(rec.encode_record(topic, b"", b"", b"", b"payload", 1))
    rec.PATCH.pack_into(buf, rec.PATCH_OFFSET, queue_id, 0, phys, 1, 2)
    rec.seal(buf, 0)
    return bytes(buf)


def transfer(offset: int, data: bytes) -> list[zmq.Frame]:
    msg = pb.HaTransfer(epoch=1, offset=offset, master_max_offset=offset + len(data))
    head = pb.Frame(version=1, type=pb.HA_TRANSFER, payload=msg.SerializeToString())
    return [zmq.Frame(head.SerializeToString()), zmq.Frame(data)]


def test_a_replicated_record_naming_a_path_stops_the_link_and_is_not_kept(tmp_path):
    store = MessageStore(small(tmp_path / "data"))
    store.start()
    client = HAClient(store, store.config, lambda: "tcp://master:1", lambda _c: None, epoch=1)
    good = stored(b"T", 0, 0)
    client._apply(transfer(0, good))        # checked (and acked), its entry written after
    assert store.commitlog.max_offset == len(good) and store.find_queue("T", 0) is None
    client._finish()
    assert store.find_queue("T", 0).max_offset == 1
    before = files_under(tmp_path)
    bad = stored(b"../../escape", 0, len(good)) + stored(b"T", 0, 0)
    with pytest.raises(ReplicationHalted, match="names a queue this store refuses"):
        client._apply(transfer(len(good), bad))
    assert store.commitlog.max_offset == len(good) == store.dispatched_offset
    assert files_under(tmp_path) == before
    assert not os.path.exists(tmp_path / "escape")
    store.close()


def test_a_bad_directory_found_at_start_is_ignored_and_logged(tmp_path, caplog):
    store = MessageStore(small(tmp_path / "data"))
    store.start()
    store.close()
    (tmp_path / "data" / "consumequeue" / "SCHEDULE_TOPIC_XXXX" / "4096").mkdir(parents=True)
    (tmp_path / "data" / "consumequeue" / "bad name" / "0").mkdir(parents=True)
    store = MessageStore(small(tmp_path / "data"))
    with caplog.at_level(logging.ERROR):
        store.start()
    assert store.queues == {}
    assert caplog.text.count("ignoring consume-queue directory") == 2
    store.close()
