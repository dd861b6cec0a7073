"""A slave acks a transfer once its records are checked and its log is
flushed, and writes their consume-queue entries after the ack (issue 41:
the entries, the index and the idempotent batches' bookkeeping were 35-45
us of each SYNC send's round trip). What must still hold, whatever the
schedule: no report ever acks a byte of a chunk that fails the check, and
every chunk acked gets its entries, also when chunks arrive back to back
(each chunk's entries are written before the next one is checked).

Real parts: the slave's HAClient thread and store on disk, dialling a
libzmq ROUTER that plays the master, sending transfers made here (one of
them damaged on purpose) and reading every report."""

import time

import pytest
import zmq

from duomq.common.config import BrokerConfig
from duomq.format import record as rec
from duomq.proto import codec, pb
from duomq.replication.ha_client import HAClient
from duomq.store import MessageStore
from duomq.testing.harness import wait_for

pytestmark = pytest.mark.integration


def stored(topic: bytes, queue_id: int, queue_offset: int, phys: int) -> bytes:
    """A record as a master stores it (broker fields patched and sealed)."""
    buf = bytearray(rec.encode_record(topic, b"", b"", b"", b"payload", 1))
    rec.PATCH.pack_into(buf, rec.PATCH_OFFSET, queue_id, queue_offset, phys, 1, 2)
    rec.seal(buf, 0)
    return bytes(buf)


def chunk(at: int, first_qoff: int, n: int) -> bytes:
    out = b""
    for i in range(n):
        out += stored(b"T", 0, first_qoff + i, at + len(out))
    return out


class FakeMaster:
    """A ROUTER the slave dials; every report it sends is kept."""

    def __init__(self):
        self.ctx = zmq.Context()
        self.router = self.ctx.socket(zmq.ROUTER)
        self.router.setsockopt(zmq.LINGER, 0)
        self.address = f"tcp://127.0.0.1:{self.router.bind_to_random_port('tcp://127.0.0.1')}"
        self.peer = b""
        self.reports: list[pb.HaReport] = []

    def read(self, timeout_s: float = 0.05) -> None:
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            if not self.router.poll(max(1, int(left * 1000))):
                continue
            self.peer, data = self.router.recv_multipart()
            self.reports.append(codec.decode_request(codec.decode_frame(data)))

    def send(self, offset: int, data: bytes, master_max: int) -> None:
        msg = pb.HaTransfer(epoch=1, offset=offset, master_max_offset=master_max,
                            confirmed_offset=offset, ack_now=True)
        self.router.send_multipart([self.peer, codec.encode_request(0, pb.HA_TRANSFER, msg),
                                    data])

    def acked(self) -> int:
        return max((r.acked_offset for r in self.reports), default=-1)

    def close(self) -> None:
        self.router.close(0)
        self.ctx.term()


@pytest.mark.parametrize("ha_transport", ["native", "zeromq"])
def test_a_damaged_chunk_is_never_acked_and_every_acked_chunk_gets_its_entries(
        tmp_path, ha_transport):
    cfg = BrokerConfig(data_dir=str(tmp_path / "s"), broker_id=1, flush="SYNC_FLUSH",
                       ha_heartbeat_ms=100, ha_transport=ha_transport)
    store = MessageStore(cfg)
    store.start()
    master = FakeMaster()
    client = HAClient(store, cfg, lambda: master.address, lambda _c: None, epoch=1)
    client.start()
    try:
        wait_for(lambda: master.read() or master.reports, 10, "the slave's first report")
        a = chunk(0, 0, 3)
        master.send(0, a, len(a))
        wait_for(lambda: master.read() or master.acked() == len(a), 10, "the first chunk acked")
        # two chunks back to back: the first one's entries are written before
        # the second is checked, the second's after its ack
        b = chunk(len(a), 3, 2)
        c = chunk(len(a) + len(b), 5, 4)
        end = len(a) + len(b) + len(c)
        master.send(len(a), b, end)
        master.send(len(a) + len(b), c, end)
        wait_for(lambda: master.read() or master.acked() == end, 10, "both chunks acked")
        wait_for(lambda: (q := store.find_queue("T", 0)) is not None and q.max_offset == 9, 10,
                 "every acked record in its queue")
        # a chunk whose second record is damaged (a payload byte changed after the seal)
        bad = bytearray(chunk(end, 9, 2))
        bad[-1] ^= 0xFF
        master.send(end, bytes(bad), end + len(bad))
        wait_for(lambda: master.read() or client.halted, 10, "the slave to stop")
        master.read(0.3)                         # whatever it might still send
        assert "damaged replicated record" in client.halted
        assert master.acked() == end and max(r.max_offset for r in master.reports) == end
        assert store.commitlog.max_offset == end == store.dispatched_offset
        assert store.find_queue("T", 0).max_offset == 9
    finally:
        client.shutdown()
        master.close()
        store.close()


def applied_not_finished(tmp_path) -> tuple[MessageStore, HAClient, BrokerConfig, int]:
    """A slave that applied and acked a chunk of 4 records (its log flushed)
    and has not yet written their entries: the moment between ack and ``_finish``."""
    cfg = BrokerConfig(data_dir=str(tmp_path / "s"), broker_id=1, flush="SYNC_FLUSH")
    store = MessageStore(cfg)
    store.start()
    client = HAClient(store, cfg, lambda: None, lambda _c: None, epoch=1)
    data = chunk(0, 0, 4)
    msg = pb.HaTransfer(epoch=1, offset=0, master_max_offset=len(data), ack_now=True)
    client._apply([codec.encode_request(0, pb.HA_TRANSFER, msg), data])
    assert client.acked_offset() == len(data) and store.find_queue("T", 0) is None
    return store, client, cfg, len(data)


def test_a_slave_killed_between_its_ack_and_its_entries_rebuilds_them_at_start(tmp_path):
    """kill -9 after the report left and before the entries were written:
    the acked records are in the flushed log, and recovery points the queue
    at every one of them."""
    store, _client, cfg, end = applied_not_finished(tmp_path)
    store.close()                      # nothing more written: as a process that died here
    again = MessageStore(cfg)
    again.start()
    try:
        assert again.commitlog.max_offset == end == again.dispatched_offset
        assert again.find_queue("T", 0).max_offset == 4
    finally:
        again.close()


def test_a_slave_promoted_before_its_entries_were_written_serves_every_acked_record(tmp_path):
    """The promotion's own dispatch (``MasterParts``) finds the acked chunk
    not yet pointed to and writes it, once; the link's late ``_finish``
    (a thread that outlived its join) then refuses to write it again."""
    store, client, _cfg, end = applied_not_finished(tmp_path)
    try:
        assert store.dispatch() == 4                   # as a promotion does
        assert store.find_queue("T", 0).max_offset == 4 and store.dispatched_offset == end
        with pytest.raises(ValueError, match="cannot be written at"):
            client._finish()
        assert store.find_queue("T", 0).max_offset == 4 and store.messages_stored == 4
    finally:
        store.close()
