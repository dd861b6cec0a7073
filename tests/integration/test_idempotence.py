"""Idempotent sends against real brokers: a send whose answer was lost (the
master paused past the attempt's timeout, so the producer retries while
the first request is still queued) is stored once; a numbered batch sent
again after a restart (graceful, and kill -9 with recovery) or to the new
master after a failover is answered with the first store's offsets and
stored once; consumers never see the numbering."""

import threading
import time

import pytest
from kazoo.client import KazooClient

from duomq.client import Message, Producer, PullConsumer
from duomq.client.producer.producer import encode_batch
from duomq.client.remoting import RemotingClient
from duomq.common.idempotence import sequencing
from duomq.common.message import MessageQueue
from duomq.coordinator.paths import ZkPaths
from duomq.format import record as rec
from duomq.proto import pb
from duomq.testing.harness import master_id, wait_for

pytestmark = pytest.mark.integration
Q0 = MessageQueue("Once", "broker-a", 0)


def numbered(pid: int, seq: int, bodies: list[bytes], queue_id: int = 0,
             numbering: dict[str, str] | None = None) -> pb.SendRequest:
    """A batch as an idempotent producer sends it: its first record flagged,
    carrying the producer id, the sequence and the count (``numbering``:
    those properties spelled otherwise)."""
    msgs = [Message("Once", b) for b in bodies]
    data, _ = encode_batch(msgs[1:], "Once", 1, rec.NO_HOST, 1 << 20) if len(msgs) > 1 \
        else (b"", False)
    head = rec.encode_record(b"Once", b"", b"", rec.encode_properties(
        numbering or sequencing(pid, seq, len(msgs))), msgs[0].body, 1, rec.NO_HOST,
        rec.FLAG_SEQUENCED)
    return pb.SendRequest(topic="Once", queue_id=queue_id, count=len(msgs), records=head + data)


def send(address: str, req: pb.SendRequest) -> pb.SendResponse:
    remoting = RemotingClient("idempotence-test")
    try:
        status, error, resp = remoting.call(address, pb.SEND, req, 10)
    finally:
        remoting.close()
    assert status == pb.OK, error
    return resp


def stored(zk, cl, topic="Once") -> list:
    out = []
    with PullConsumer("audit", zookeeper=zk, cluster=cl) as c:
        for mq in c.queues(topic):
            off = 0
            while (r := c.pull(mq, off, 100)).messages:
                out += r.messages
                off = r.next_offset
    return out


def test_a_send_whose_answer_was_lost_is_stored_once(local_cluster):
    master = local_cluster.add_broker("broker-a", 0)
    local_cluster.create_topic("Once", 2)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    with Producer(zookeeper=zk, cluster=cl, send_timeout_ms=15_000, retry_times_when_send_failed=5) as p:
        assert p.send(Message("Once", b"warm")).ok        # this thread's connection is up
        # the master stops reading: the request waits in its socket, the
        # attempt times out (its grace is 2 s) and is retried there; then
        # the master reads both
        master.suspend()
        waking = threading.Timer(2.4, master.resume)
        waking.start()
        try:
            r = p.send(Message("Once", b"x"))
        finally:
            waking.join()
    assert r.ok and r.duplicate
    bodies = [m.body for m in stored(zk, cl)]
    assert sorted(bodies) == [b"warm", b"x"], bodies
    assert all("PRODUCER_ID" not in m.properties for m in stored(zk, cl))


def test_a_retry_keeps_its_queue_while_the_group_looks_empty(local_cluster):
    """The interleaving a ZooKeeper session expiry makes: the first attempt
    is queued in a paused master when the group's route and member nodes
    vanish (every broker re-registering), so the attempt is abandoned with
    its outcome unknown and the group looks empty. The retry must wait for
    the group and go to the same queue with the same numbering: stored
    once, across every queue, and answered as a duplicate."""
    master = local_cluster.add_broker("broker-a", 0)
    local_cluster.create_topic("Once", 4)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    paths = ZkPaths(cl)
    admin = KazooClient(hosts=zk)
    admin.start(10)
    try:
        with Producer(zookeeper=zk, cluster=cl, send_timeout_ms=15_000, retry_times_when_send_failed=5) as p:
            assert p.send(Message("Once", b"warm")).ok
            route = admin.get(paths.route("Once", "broker-a"))[0]
            member = admin.get(paths.member("broker-a", 0))[0]
            master.suspend()

            def vanish_and_return():
                admin.delete(paths.route("Once", "broker-a"))
                admin.delete(paths.member("broker-a", 0))
                time.sleep(1.0)                      # the group looks empty
                master.resume()
                time.sleep(1.0)
                # registered again (the master's route watch may have done it already)
                if not admin.exists(paths.route("Once", "broker-a")):
                    admin.create(paths.route("Once", "broker-a"), route)
                if not admin.exists(paths.member("broker-a", 0)):    # (or it did so itself)
                    admin.create(paths.member("broker-a", 0), member, ephemeral=True)

            fault = threading.Timer(0.5, vanish_and_return)
            fault.start()
            try:
                r = p.send(Message("Once", b"x"))
            finally:
                fault.join()
        assert r.ok and r.duplicate, r
        bodies = [m.body for m in stored(zk, cl)]
        assert sorted(bodies) == [b"warm", b"x"], bodies
    finally:
        admin.stop()
        admin.close()


@pytest.mark.parametrize("how,env", [("restart", {}), ("kill", {}),
                                      # the broker without its C (proto/_wire.c, the record
                                      # loops): SEND read and answered with protobuf
                                      ("restart", {"DUOMQ_NATIVE": "0"})])
def test_a_numbered_batch_is_stored_once_across_a_restart(local_cluster, how, env):
    broker = local_cluster.add_broker("broker-a", 0, env=env)
    local_cluster.create_topic("Once", 1)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    first = send(broker.address, numbered(77, 0, [b"a", b"b", b"c"]))
    assert not first.duplicate and len(first.physical_offsets) == 3
    again = send(broker.address, numbered(77, 0, [b"a", b"b", b"c"]))
    assert again.duplicate and list(again.physical_offsets) == list(first.physical_offsets)
    if how == "kill":
        broker.kill()
    broker.restart()
    after = send(broker.address, numbered(77, 0, [b"a", b"b", b"c"]))
    assert after.duplicate and after.queue_offset == first.queue_offset
    assert list(after.physical_offsets) == list(first.physical_offsets)
    nxt = send(broker.address, numbered(77, 1, [b"d"]))        # the next one is new
    assert not nxt.duplicate and nxt.queue_offset == 3
    other = send(broker.address, numbered(78, 0, [b"e"]))      # another producer's
    assert not other.duplicate
    assert [m.body for m in stored(zk, cl)] == [b"a", b"b", b"c", b"d", b"e"]


def test_the_new_master_knows_the_sequences_its_log_holds(local_cluster):
    first, second = _acking_sync_pair(local_cluster, queues=1)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    orig = send(first.address, numbered(5, 0, [b"paid"]))
    _fail_over(zk, cl, first, second)
    again = send(second.address, numbered(5, 0, [b"paid"]))
    assert again.duplicate and list(again.physical_offsets) == list(orig.physical_offsets)
    # the probe is numbered too: stored once however often it was sent
    assert sorted(m.body for m in stored(zk, cl)) == [b"paid", b"probe", b"warm"]


def test_after_a_failover_every_batch_of_every_queue_is_known_to_the_new_master(local_cluster):
    """The whole history, every queue: three producers' batches on four
    queues (one record, three, and seventy: a slave dispatches a long run
    in bulk, a short one record by record), one producer spelling its
    numbering as only the Python reads it (``0x`` id, ``+`` sequence; the C
    loops leave it to the Python), all acked by a SYNC pair. After the
    master is killed and its slave took over, every batch sent again is
    answered as a duplicate with its first offsets, and the log holds
    every message once."""
    first, second = _acking_sync_pair(local_cluster, queues=4)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    sent = []
    for q in range(4):
        for pid in (11, 12, 13):
            for seq, n in enumerate((1, 3, 70)):
                bodies = [b"%d-%d-%d-%d" % (pid, q, seq, i) for i in range(n)]
                spelled = {"PRODUCER_ID": f"0x{pid:x}", "PRODUCER_SEQ": f"+{seq}",
                           "PRODUCER_BATCH": str(n)} if pid == 13 else None
                req = numbered(pid, seq, bodies, q, spelled)
                sent.append((req, send(first.address, req)))
    assert not any(resp.duplicate for _req, resp in sent)
    _fail_over(zk, cl, first, second)
    for req, orig in sent:
        again = send(second.address, req)
        assert again.duplicate, (req.queue_id, req.count)
        assert again.queue_offset == orig.queue_offset
        assert list(again.physical_offsets) == list(orig.physical_offsets)
    bodies = sorted(m.body for m in stored(zk, cl))
    want = sorted([b"warm", b"probe"] + [b"%d-%d-%d-%d" % (pid, q, seq, i) for q in range(4)
                                         for pid in (11, 12, 13)
                                         for seq, n in enumerate((1, 3, 70))
                                         for i in range(n)])
    assert bodies == want


def _acking_sync_pair(local_cluster, queues: int):
    """A SYNC + SYNC_FLUSH pair, broker 0 master, topic ``Once`` of
    ``queues`` queues, acking (a message ``warm`` stored); (master, slave)."""
    settings = {"replication": "SYNC", "flush": "SYNC_FLUSH"}
    first = local_cluster.add_broker("broker-a", 0, **settings)
    second = local_cluster.add_broker("broker-a", 1, **settings)
    local_cluster.create_topic("Once", queues)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    wait_for(lambda: master_id(zk, cl) == 0, 10, "broker 0 master")
    with Producer(zookeeper=zk, cluster=cl) as p:
        wait_for(lambda: p.send(Message("Once", b"warm")).ok, 20, "the pair to ack")
    return first, second


def _fail_over(zk, cl, first, second) -> None:
    """kill -9 of the master, its slave's takeover, the pair whole again
    and acking (a numbered ``probe`` stored once)."""
    first.kill()
    wait_for(lambda: master_id(zk, cl) == 1, 30, "the slave to take over")
    first.restart()
    wait_for(lambda: _acks(second.address), 30, "the new master to ack")


def _acks(address: str) -> bool:
    remoting = RemotingClient("probe")
    try:
        status, _, _ = remoting.call(address, pb.SEND, numbered(999, 0, [b"probe"]), 5)
        return status == pb.OK
    except Exception:
        return False
    finally:
        remoting.close()


@pytest.mark.parametrize("transport", ["native", "zeromq"])
def test_a_retry_read_in_the_same_turn_as_its_first_send_is_stored_once(local_cluster,
                                                                         transport):
    """The broker finishes a send's write (its queue entries, its
    producer's sequence) after the ack, before it serves the next request:
    a retry pipelined right behind the first send, read in the same turn,
    must find the first and be answered as a duplicate. Each pair is sent
    at once on one connection, both queued before either is answered."""
    import zmq

    from duomq.proto import codec
    local_cluster.add_broker("broker-a", 0, flush="ASYNC_FLUSH", client_transport=transport)
    local_cluster.create_topic("Once", 1)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    address = local_cluster.brokers[0].address
    ctx = zmq.Context()
    try:
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(address)
        for seq in range(40):
            req = numbered(5, seq, [b"%d" % seq, b"%d'" % seq])
            sock.send_multipart([codec.encode_request(2 * seq, pb.SEND, req)])
            sock.send_multipart([codec.encode_request(2 * seq + 1, pb.SEND, req)])
            answers = []
            for _ in range(2):
                assert sock.poll(10_000)
                frame = codec.decode_frame(sock.recv())
                assert frame.status == pb.OK, frame.error
                answers.append(codec.decode_response(frame))
            first, again = answers
            assert not first.duplicate and again.duplicate, seq
            assert list(again.physical_offsets) == list(first.physical_offsets)
    finally:
        ctx.destroy(linger=0)
    bodies = sorted(m.body for m in stored(zk, cl))
    assert bodies == sorted(b for s in range(40) for b in (b"%d" % s, b"%d'" % s))
