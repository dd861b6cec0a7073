"""A peer that does not read, sends huge frames or floods garbage costs the
broker a bounded amount of memory, given back when it goes, and the broker
goes on serving others (the probes of issue 17; bench/resource_probes.py
measures them with other clients' latency)."""

import threading
import time

import pytest
import zmq

from duomq.client import Message, Producer
from duomq.common.errors import MessageTooLargeError
from duomq.proto import codec, pb
from duomq.testing.harness import wait_for

pytestmark = pytest.mark.integration
MIB = 1 << 20


class PeakRss:
    """The broker's anonymous RSS (its heap and buffers; not the commit-log
    pages its mappings touch) before and at its peak while the block runs (MiB)."""

    def __init__(self, pid: int):
        self.pid = pid
        self.before = self.peak = self.now()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def now(self) -> float:
        return anon_rss_mib(self.pid)

    def _watch(self):
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, self.now())

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    @property
    def growth(self) -> float:
        return self.peak - self.before


def anon_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no RssAnon")


@pytest.fixture
def ctx():
    c = zmq.Context()
    yield c
    c.destroy(linger=0)


def dealer(ctx, address: str, rcvhwm: int = 1) -> zmq.Socket:
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.SNDHWM, 0)
    s.setsockopt(zmq.RCVHWM, rcvhwm)
    s.setsockopt(zmq.RCVBUF, 4096)
    s.connect(address)
    return s


def call(sock, type_, message, timeout_ms=5000):
    sock.send(codec.encode_request(7, type_, message))
    assert sock.poll(timeout_ms), "no answer"
    return codec.decode_frame(sock.recv())


def log_of(broker) -> str:
    with open(broker.log_path) as f:
        return f.read()


def serves(local_cluster, topic="Other") -> bool:
    with Producer(zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster,
                  send_timeout_ms=5000) as p:
        return p.send(Message(topic, b"still here")).ok


@pytest.fixture
def broker(local_cluster):
    b = local_cluster.add_broker("broker-a", 0, max_queued_bytes_per_client=16 * MIB,
                                 client_mute_ms=2000, max_consumer_groups=5)
    local_cluster.create_topic("Backlog", queues=1)
    local_cluster.create_topic("Other", queues=2)
    return b


def test_a_client_that_never_reads_its_pull_answers_is_muted(local_cluster, broker, ctx):
    with Producer(zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster) as p:
        for _ in range(10):
            p.send_batch([Message("Backlog", b"b" * 1024) for _ in range(500)])
    s = dealer(ctx, broker.address)
    req = codec.encode_request(1, pb.PULL, pb.PullRequest(
        consumer_group="g", topic="Backlog", queue_id=0, queue_offset=0, max_messages=1024,
        max_bytes=4 * MIB))
    with PeakRss(broker.pid) as rss:
        end = time.monotonic() + 3.0
        while time.monotonic() < end:          # about 1 MiB answered per pull, none read
            for _ in range(100):
                s.send(req)
            time.sleep(0.001)
        assert serves(local_cluster)
    s.close(0)
    # 16 answers in ZeroMQ's pipe plus 16 MiB waiting: well under 100 MiB (it was GiBs)
    assert rss.growth < 100, f"RSS grew {rss.growth:.0f} MiB"
    assert "does not read its answers" in log_of(broker)
    wait_for(lambda: "forgot muted client" in log_of(broker), what="the muted client forgotten")


def test_a_frame_over_max_frame_bytes_is_never_read(local_cluster, broker, ctx):
    s = dealer(ctx, broker.address)
    big = pb.Frame(version=1, request_id=1, type=pb.SEND, payload=pb.SendRequest(
        topic="Other", count=1, records=bytes(200 * MIB)).SerializeToString()).SerializeToString()
    with PeakRss(broker.pid) as rss:
        s.send(big)
        time.sleep(2.0)
        assert serves(local_cluster)
    assert rss.growth < 50, f"RSS grew {rss.growth:.0f} MiB"
    s.close(0)


def test_a_producer_batch_over_the_brokers_frame_limit_is_refused_before_sending(
        local_cluster, ctx):
    local_cluster.add_broker("broker-a", 0, max_message_bytes=64 << 10,
                             max_frame_bytes=(64 << 10) * 4, max_pull_bytes=1 << 20)
    local_cluster.create_topic("Other", queues=1)
    with Producer(zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster) as p:
        with pytest.raises(MessageTooLargeError, match=r"reads requests of at most 262144 "
                                                       r"bytes \(max_frame_bytes\)"):
            p.send_batch([Message("Other", b"x" * 60_000) for _ in range(8)])
        assert p.send_batch([Message("Other", b"x" * 60_000) for _ in range(2)]).ok


def test_client_ids_and_groups_are_bounded(local_cluster, broker, ctx):
    s = dealer(ctx, broker.address, rcvhwm=1000)
    before = call(s, pb.BROKER_STATUS, pb.BrokerStatusRequest())
    with PeakRss(broker.pid) as rss:
        for i in range(200):
            f = call(s, pb.HEARTBEAT, pb.HeartbeatRequest(client_id=f"{i}" + "c" * MIB))
            assert f.status == pb.BAD_REQUEST and "at most 255 characters" in f.error
    f = call(s, pb.HEARTBEAT, pb.HeartbeatRequest(client_id="ok", consumer_groups=["../x"]))
    assert f.status == pb.INVALID_NAME
    after = codec.decode_response(call(s, pb.BROKER_STATUS, pb.BrokerStatusRequest()))
    assert after.clients == codec.decode_response(before).clients
    assert rss.growth < 100, f"RSS grew {rss.growth:.0f} MiB"
    s.close(0)


def test_offset_commits_only_for_hosted_queues_and_a_bounded_number_of_groups(
        local_cluster, broker, ctx):
    s = dealer(ctx, broker.address, rcvhwm=1000)

    def commit(group, topic, qid):
        req = pb.CommitOffsetRequest(consumer_group=group)
        req.offsets.add(topic=topic, queue_id=qid, offset=1)
        return call(s, pb.COMMIT_OFFSET, req)

    for i in range(2000):
        assert commit(f"g{i}", f"t{i}", 0).status == pb.TOPIC_NOT_EXIST
    assert commit("g", "Other", 7).status == pb.BAD_REQUEST
    for i in range(5):
        assert commit(f"g{i}", "Other", 1).status == pb.OK
    f = commit("g5", "Other", 1)
    assert f.status == pb.BAD_REQUEST and "max_consumer_groups (5)" in f.error
    assert commit("g0", "Other", 0).status == pb.OK          # a known group goes on
    status = codec.decode_response(call(s, pb.BROKER_STATUS, pb.BrokerStatusRequest()))
    assert len(status.group_offsets) == 6
    s.close(0)


def test_replication_peers_that_claim_everything_and_never_read_get_one_window(
        local_cluster, broker, ctx):
    with Producer(zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster) as p:
        for _ in range(100):                                   # 50 MiB of log
            p.send_batch([Message("Backlog", b"b" * 1024) for _ in range(500)])
    peers = [dealer(ctx, f"tcp://127.0.0.1:{broker.ha_port}") for _ in range(3)]

    def claim(i, peer):
        r = pb.HaReport(broker_id=10 + i, max_offset=0, acked_offset=1 << 60, address="x",
                        epoch=1)
        peer.send(pb.Frame(version=1, type=pb.HA_REPORT, payload=r.SerializeToString())
                  .SerializeToString())

    with PeakRss(broker.pid) as rss:
        for _ in range(4):
            for i, peer in enumerate(peers):
                claim(i, peer)
            time.sleep(0.5)
        assert serves(local_cluster)
    for peer in peers:
        peer.close(0)
    assert rss.growth < 120, f"RSS grew {rss.growth:.0f} MiB"
