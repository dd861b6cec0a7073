"""A slave replicates only from the master of the epoch it was ordered to
follow, after it has cut its log for that epoch (issue: in 3 of 23 follow
orders under load a slave dialled the new master 5-10 ms before deciding
its cut; bytes fetched in that gap, and acked, would have been cut).

Real parts: a ZooKeeper server (the registry's watch on the master node),
two stores on disk, the master's HAService on a ZeroMQ ROUTER served by a
thread as the serving loop serves it, and the slave's HAClient thread.
The interleaving is forced: the master node already names the master of
epoch 2, which holds records the slave lacks, while the slave's link still
follows epoch 1 and its Follow order has not come."""

import threading
import time

import pytest
import zmq

from duomq.common.config import BrokerConfig
from duomq.controller.ha_cycle import NO_CUT
from duomq.controller.registry import BrokerRegistry
from duomq.coordinator.nodes import MasterNode, MemberNode
from duomq.coordinator.paths import ZkPaths
from duomq.format import record as rec
from duomq.proto import codec, pb
from duomq.replication.ha_client import HAClient
from duomq.replication.ha_service import HAService
from duomq.slave.parts import truncate
from duomq.store import MessageStore

pytestmark = pytest.mark.integration
ONE = rec.encode_record(b"T", b"", b"", b"", b"x" * 200, 1)


class ServedMaster:
    """The master of ``epoch``: its store, and its HA port served by a thread."""

    def __init__(self, store, epoch: int):
        self.ctx = zmq.Context()
        self.router = self.ctx.socket(zmq.ROUTER)
        self.router.setsockopt(zmq.ROUTER_MANDATORY, 1)
        port = self.router.bind_to_random_port("tcp://127.0.0.1")
        self.address = f"tcp://127.0.0.1:{port}"
        self.ha = HAService(store, store.config, self.router, epoch, None)
        self.reports: list[pb.HaReport] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            if self.router.poll(10):
                identity, data = self.router.recv_multipart()
                self.reports.append(codec.decode_request(codec.decode_frame(data)))
                self.ha.on_message(identity, data, time.monotonic())
            self.ha.pump(time.monotonic(), 0, False)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.router.close(0)
        self.ctx.term()


def store_at(path, records: int) -> MessageStore:
    s = MessageStore(BrokerConfig(data_dir=str(path), ha_heartbeat_ms=100))
    s.start()
    if records:
        s.put_batch("T", 0, bytearray(ONE * records), records)
    return s


@pytest.fixture
def parts(zk, zk_hosts, tmp_path):
    cfg = BrokerConfig(cluster="follow", group="g", broker_id=1, ha_heartbeat_ms=100)
    registry = BrokerRegistry(zk, cfg, lambda: MemberNode(1, 0))
    registry.register()
    master_store, slave_store = store_at(tmp_path / "m", 30), store_at(tmp_path / "s", 10)
    master = ServedMaster(master_store, epoch=2)
    zk.create(ZkPaths("follow").master("g"),
              MasterNode(0, 2, "tcp://127.0.0.1:1", master.address).to_bytes())
    deadline = time.monotonic() + 5
    while registry.master is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert registry.master is not None and registry.master.epoch == 2
    yield registry, master, master_store, slave_store
    master.close()
    registry.close(False)
    master_store.close()
    slave_store.close()


def link(store, address_of, epoch: int) -> HAClient:
    client = HAClient(store, store.config, address_of, lambda _c: None, epoch=epoch)
    client.start()
    return client


def test_a_link_of_the_old_epoch_never_dials_the_new_master(parts):
    registry, master, master_store, slave_store = parts
    end = slave_store.commitlog.max_offset
    old = link(slave_store, lambda: registry.master_ha_address(1), epoch=1)
    try:
        time.sleep(1.0)                     # the Follow order is late
        assert slave_store.commitlog.max_offset == end
        assert master.reports == [] and master.ha.links == {}
    finally:
        old.shutdown()


def test_a_link_that_reaches_a_master_of_another_epoch_applies_nothing_and_is_not_credited(
        parts):
    """The gap forced open: the old link is handed the new master's address
    (as the registry did before), the master has records to send at once."""
    registry, master, master_store, slave_store = parts
    end = slave_store.commitlog.max_offset
    old = link(slave_store, lambda: master.address, epoch=1)
    try:
        deadline = time.monotonic() + 5
        while not master.reports and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.5)
        assert master.reports and all(r.epoch == 1 for r in master.reports)
        assert master.ha.links == {}               # ignored: nothing credited, nothing sent
        assert slave_store.commitlog.max_offset == end
    finally:
        old.shutdown()
    # the Follow order: the cut is judged at cut time (the slave's log of
    # epoch 1 began with epoch 1; epoch 2 began at the master's offset 10 records in)
    assert not truncate(slave_store, 2, NO_CUT)
    assert slave_store.commitlog.max_offset == end
    new = link(slave_store, lambda: registry.master_ha_address(2), epoch=2)
    try:
        deadline = time.monotonic() + 5
        while slave_store.commitlog.max_offset < master_store.commitlog.max_offset and \
                time.monotonic() < deadline:
            time.sleep(0.01)
        assert slave_store.commitlog.max_offset == master_store.commitlog.max_offset
        (credited,) = master.ha.links.values()
        assert credited.acked_offset <= slave_store.commitlog.max_offset
    finally:
        new.shutdown()


def test_bytes_appended_after_the_cycle_read_the_log_are_cut_at_the_epoch_start(tmp_path):
    """The old master still streams to its slave after the new epoch began
    at 10 records: what the slave holds past that point is cut, however
    much it appended after the controller read its log end."""
    store = store_at(tmp_path / "s", 10)
    start_of_epoch_2 = store.commitlog.max_offset
    store.put_batch("T", 0, bytearray(ONE * 5), 5)       # arrived after the cycle's read
    try:
        assert truncate(store, 2, start_of_epoch_2)
        assert store.commitlog.max_offset == start_of_epoch_2
    finally:
        store.close()
