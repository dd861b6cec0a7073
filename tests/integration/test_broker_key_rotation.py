"""Rotating the brokers' keypair on a running secured pair, as README's
procedure says: `duomq auth broker-key new`, a rolling restart (restart the
slave, switch over to it, restart the old master), `duomq auth trust`,
`promote`, a rolling restart, `retire`, a rolling restart. A producer
sends all along from promote on; nothing it was acked for is lost, the
slave follows whatever key its master serves, and in the end the old key
is refused on both ports."""

import shutil
import threading
import time

import pytest
import zmq
from zmq.utils.monitor import recv_monitor_message

from duomq.auth.credentials import Credentials, load_broker_keys
from duomq.client import Message, Producer, PullConsumer
from duomq.common.errors import AuthenticationError, DuomqError
from duomq.common.message import MessageQueue
from duomq.coordinator.paths import ZkPaths
from duomq.testing.harness import master_id, master_info, member_node, read_node, run_cli, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]


class Sender(threading.Thread):
    """Sends numbered messages until stopped; keeps the bodies it was acked for."""

    def __init__(self, zk: str, cl: str, credentials: str):
        super().__init__(daemon=True)
        self.producer = Producer(zookeeper=zk, cluster=cl, credentials=credentials)
        self.acked: list[bytes] = []
        self.failed: dict[str, int] = {}
        self.stopping = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.stopping.is_set():
            body = b"r%d" % i
            i += 1
            try:
                if self.producer.send(Message("Secret", body), timeout_ms=3000).ok:
                    self.acked.append(body)
            except DuomqError as exc:
                self.failed[type(exc).__name__] = self.failed.get(type(exc).__name__, 0) + 1
            time.sleep(0.005)

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)
        self.producer.close()


def test_a_broker_key_rotation_with_rolling_restarts_loses_nothing(secured, tmp_path):
    cluster, keys, admin, *brokers = secured
    zk, cl = cluster.zookeeper, cluster.cluster
    paths = ZkPaths(cl)
    endpoint = ["--zookeeper", zk, "--cluster", cl]
    old_keys = load_broker_keys(str(keys))
    old_only = str(tmp_path / "old-only.json")
    shutil.copy(admin, old_only)
    with Producer(zookeeper=zk, cluster=cl, credentials=admin) as p:
        assert p.send_batch([Message("Secret", b"before")] * 20,
                            queue=MessageQueue("Secret", "broker-a", 0)).ok

    def following(b) -> bool:
        info = member_node(zk, cl, "broker-a", b.broker_id)
        return info is not None and not info.is_master \
            and 0 < info.master_max_offset == info.max_offset

    def roll() -> None:
        """Restart the slave, hand the group over to it, restart the old master."""
        (master,) = [b for b in brokers if b.broker_id == master_id(zk, cl)]
        (slave,) = [b for b in brokers if b is not master]
        slave.restart()
        wait_for(lambda: following(slave), 30, f"broker {slave.broker_id} to follow again")
        run_cli("failover", "broker-a", "--to", str(slave.broker_id), *endpoint)
        master.restart()
        wait_for(lambda: following(master), 30, f"broker {master.broker_id} to follow the "
                                                f"new master")

    def published() -> dict:
        return read_node(zk, paths.auth_config)

    # 1. a next key: brokers accept it, still serve the old one
    said = run_cli("auth", "broker-key", "new", "--auth-dir", str(keys)).stdout
    assert "Next: restart the brokers" in said
    roll()
    assert published()["broker_public_key"] == old_keys.public.decode()
    assert len(published()["broker_public_keys"]) == 2
    run_cli("auth", "trust", "--credentials", admin, *endpoint)
    assert len(Credentials.load(admin).broker_keys) == 2

    # 2. promote under traffic: for a while one broker serves the old key and one the new
    sender = Sender(zk, cl, admin)
    sender.start()
    try:
        wait_for(lambda: len(sender.acked) >= 50, 30, "acked sends before the promotion")
        run_cli("auth", "broker-key", "promote", "--auth-dir", str(keys))
        new_public = load_broker_keys(str(keys)).public
        roll()
        assert {member_node(zk, cl, "broker-a", b.broker_id).public_key
                for b in brokers} == {new_public.decode()}
        assert published()["broker_public_key"] == new_public.decode()
        # a client that trusts only the old key is told so at once
        with pytest.raises(AuthenticationError, match="duomq auth trust"):
            Producer(zookeeper=zk, cluster=cl, credentials=old_only)

        # 3. retire the old key
        run_cli("auth", "broker-key", "retire", "--auth-dir", str(keys))
        roll()
        acked = len(sender.acked)
        wait_for(lambda: len(sender.acked) >= acked + 50, 30, "acked sends after the rotation")
    finally:
        sender.stop()
    assert published()["broker_public_keys"] == [new_public.decode()]
    run_cli("auth", "trust", "--credentials", admin, *endpoint)
    assert Credentials.load(admin).broker_keys == (new_public,)

    # nothing acked was lost
    got: set[bytes] = set()
    with PullConsumer("audit", zookeeper=zk, cluster=cl, credentials=admin) as c:
        for mq in c.queues("Secret"):
            offset = 0
            while True:
                r = c.pull(mq, offset, 500)
                if not r.messages:
                    break
                got.update(m.body for m in r.messages)
                offset = r.next_offset
    missing = set(sender.acked) - got
    assert not missing, f"{len(missing)} of {len(sender.acked)} acked messages lost"
    print(f"rotation: {len(sender.acked)} acked, failed sends {sender.failed}, 0 lost")

    # the old broker key is refused on the replication port now
    master = master_info(zk, cl)
    assert _handshake(master.ha_address, old_keys, new_public) == zmq.EVENT_HANDSHAKE_FAILED_AUTH


def _handshake(address: str, keys, server_key: bytes) -> int:
    """The first handshake event of a CURVE DEALER dialling ``address``."""
    ctx = zmq.Context.instance()
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    sock.curve_secretkey, sock.curve_publickey = keys.secret, keys.public
    sock.curve_serverkey = server_key
    monitor = sock.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED
                                      | zmq.EVENT_HANDSHAKE_FAILED_AUTH
                                      | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL)
    try:
        sock.connect(address)
        if not monitor.poll(5000):
            return 0
        return recv_monitor_message(monitor)["event"]
    finally:
        sock.disable_monitor()
        monitor.close(linger=0)
        sock.close(linger=0)
