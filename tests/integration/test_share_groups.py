"""Share groups against real brokers (issue 44): SimpleConsumers of one
group read one queue together; a message not acked comes back after its
invisible time with its delivery count; after max_deliveries it is in
%DLQ%<group>; a late ack is refused and loses nothing; the state survives
a restart and a failover; each check looks at every message of the run."""

import threading
import time
from collections import Counter

import pytest

from duomq.client import Message, Producer, PullConsumer, PullStatus, SimpleConsumer
from duomq.common.errors import BadRequestError, DuomqError, ReceiptExpiredError
from duomq.testing.harness import isr_members, master_id, wait_for

pytestmark = pytest.mark.integration


def send(zk, cl, topic, bodies):
    with Producer(zookeeper=zk, cluster=cl) as p:
        for body in bodies:
            p.send(Message(topic, body))


def drain(c, want, timeout_s=20, ack=True):
    """Receive until ``want`` messages came (acking each); the messages."""
    out = []
    deadline = time.monotonic() + timeout_s
    while len(out) < want and time.monotonic() < deadline:
        for m in c.receive(min(32, want - len(out)), wait_ms=500):
            out.append(m)
            if ack:
                c.ack(m)
    return out


def read_all(zk, cl, topic, group="auditor"):
    with PullConsumer(group, zookeeper=zk, cluster=cl) as c:
        out = []
        for mq in c.queues(topic):
            off = 0
            while True:
                r = c.pull(mq, off, max_messages=256)
                if r.status is PullStatus.NO_NEW_MESSAGE:
                    break
                out += r.messages
                off = r.next_offset
        return out


@pytest.fixture
def one_queue(local_cluster):
    local_cluster.add_broker("broker-a")
    local_cluster.create_topic("Jobs", queues=1)
    return local_cluster.zookeeper, local_cluster.cluster


def consumer(zk, cl, **kw):
    kw.setdefault("consume_from", "first")
    return SimpleConsumer("workers", subscriptions="Jobs", zookeeper=zk, cluster=cl, **kw)


def test_three_consumers_share_one_queue_and_every_message_is_acked_once(one_queue):
    zk, cl = one_queue
    bodies = [b"m%03d" % i for i in range(300)]
    send(zk, cl, "Jobs", bodies)
    got: dict[int, list] = {}
    cs = [consumer(zk, cl) for _ in range(3)]
    try:
        def run(i):
            got[i] = []
            idle = 0
            while idle < 3:
                ms = cs[i].receive(8, wait_ms=300)
                idle = 0 if ms else idle + 1
                for m in ms:
                    got[i].append(m.body)
                    cs[i].ack(m)
                    time.sleep(0.002)            # a handler's work: the others get turns
        threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        for c in cs:
            c.close()
    every = Counter(b for i in got for b in got[i])
    assert sorted(every) == bodies, "a message was lost"
    assert max(every.values()) == 1, "a message was acked twice"
    assert all(got[i] for i in range(3)), {i: len(got[i]) for i in got}


def test_a_message_not_acked_comes_back_after_its_invisible_time(one_queue):
    zk, cl = one_queue
    send(zk, cl, "Jobs", [b"only"])
    with consumer(zk, cl, invisible_duration_ms=1000) as a, consumer(zk, cl) as b:
        [m] = a.receive(8, wait_ms=2000)
        assert m.delivery_count == 1
        t0 = time.time()
        assert b.receive(8, wait_ms=300) == []           # invisible to the others
        [again] = b.receive(8, wait_ms=3000)
        assert again.body == b"only" and again.delivery_count == 2
        assert time.time() >= m.invisible_until_ms / 1000 - 0.05
        assert time.time() - t0 < 2.5
        with pytest.raises(ReceiptExpiredError, match="delivery 2"):
            a.ack(m)                                      # too late: not lost
        b.ack(again)
        assert b.receive(8, wait_ms=1500) == []
        with pytest.raises(ReceiptExpiredError, match="acked already"):
            b.ack(again)


def test_a_late_ack_is_refused_and_the_message_is_delivered_again(one_queue):
    zk, cl = one_queue
    send(zk, cl, "Jobs", [b"late"])
    with consumer(zk, cl, invisible_duration_ms=300) as c:
        [m] = c.receive(1, wait_ms=2000)
        time.sleep(0.5)
        with pytest.raises(ReceiptExpiredError, match="invisible time ended"):
            c.ack(m)
        [again] = c.receive(1, wait_ms=2000)
        assert (again.body, again.delivery_count) == (b"late", 2)
        c.ack(again)


def test_nack_and_renew(one_queue):
    zk, cl = one_queue
    send(zk, cl, "Jobs", [b"a", b"b"])
    with consumer(zk, cl, invisible_duration_ms=800) as c, consumer(zk, cl) as other:
        ms = c.receive(2, wait_ms=2000)
        assert sorted(m.body for m in ms) == [b"a", b"b"]
        a, b = sorted(ms, key=lambda m: m.body)
        c.nack(a)                                          # visible again at once, to anyone
        [a2] = other.receive(4, wait_ms=1000)
        assert (a2.body, a2.delivery_count) == (b"a", 2)
        before = b.invisible_until_ms
        c.change_invisible_duration(b, 3000)
        assert b.invisible_until_ms > before
        time.sleep(1.0)                                    # past the first deadline
        assert other.receive(4, wait_ms=200) == []         # renewed: still c's
        c.ack(b)
        other.ack(a2)
        with pytest.raises(ReceiptExpiredError):
            c.ack(a)                                       # released: no longer c's


def test_after_max_deliveries_the_message_is_in_the_groups_dlq(one_queue, local_cluster):
    zk, cl = one_queue
    send(zk, cl, "Jobs", [b"doomed", b"fine"])
    deliveries = Counter()
    with consumer(zk, cl, invisible_duration_ms=200, max_deliveries=3) as c:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            for m in c.receive(4, wait_ms=300):
                deliveries[m.body] += 1
                assert m.delivery_count == deliveries[m.body]
                if m.body == b"fine":
                    c.ack(m)
            if deliveries[b"doomed"] == 3:
                time.sleep(0.3)
                assert c.receive(4, wait_ms=500) == []     # moved, not delivered a 4th time
                break
    assert deliveries == {b"doomed": 3, b"fine": 1}
    dlq = wait_for(lambda: read_all(zk, cl, "%DLQ%workers", group="workers"),
                   what="the DLQ holds the message")
    assert [m.body for m in dlq] == [b"doomed"]
    assert dlq[0].properties["DELIVERY_COUNT"] == "3"
    assert dlq[0].properties["RETRY_TOPIC"] == "Jobs"
    figures = metrics(local_cluster.brokers[0])
    assert figures['duomq_share_dead_lettered_total{group="workers"}'] == 1
    assert figures['duomq_share_redeliveries_total{group="workers"}'] == 2
    assert figures['duomq_share_inflight{group="workers"}'] == 0


def metrics(broker) -> dict[str, float]:
    import urllib.request
    text = urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/metrics",
                                  timeout=5).read().decode()
    return {k: float(v) for k, v in (line.rsplit(" ", 1) for line in text.splitlines()
                                     if line.startswith("duomq_share"))}


def test_a_new_group_starts_at_the_end_unless_told_first(one_queue):
    zk, cl = one_queue
    send(zk, cl, "Jobs", [b"old"])
    with SimpleConsumer("latecomers", subscriptions="Jobs", zookeeper=zk, cluster=cl) as c:
        assert c.receive(4, wait_ms=200) == []
        send(zk, cl, "Jobs", [b"new"])
        assert [m.body for m in c.receive(4, wait_ms=3000)] == [b"new"]


def test_long_polling_answers_when_a_message_arrives(one_queue):
    zk, cl = one_queue
    with consumer(zk, cl) as c:
        c.receive(1, wait_ms=100)                  # the group's position is taken
        threading.Timer(0.5, send, (zk, cl, "Jobs", [b"wake"])).start()
        t0 = time.monotonic()
        [m] = c.receive(1, wait_ms=10_000)
        took = time.monotonic() - t0
        assert m.body == b"wake"
        assert 0.4 < took < 3.0, took


def test_tags_filter_and_skipped_messages_are_never_held(one_queue):
    zk, cl = one_queue
    with Producer(zookeeper=zk, cluster=cl) as p:
        for i in range(20):
            p.send(Message("Jobs", b"%d" % i, tags="keep" if i % 2 else "drop"))
    with SimpleConsumer("picky", subscriptions={"Jobs": "keep"}, zookeeper=zk, cluster=cl,
                        consume_from="first") as c:
        got = drain(c, 10)
        assert sorted(int(m.body) for m in got) == list(range(1, 20, 2))
        assert c.receive(8, wait_ms=300) == []


def test_share_groups_and_cluster_groups_read_the_same_topic_independently(one_queue):
    zk, cl = one_queue
    bodies = [b"x%02d" % i for i in range(50)]
    send(zk, cl, "Jobs", bodies)
    with consumer(zk, cl) as c:
        assert sorted(m.body for m in drain(c, 50)) == bodies
    # a cluster-mode reader of the same topic sees all of them too
    assert sorted(m.body for m in read_all(zk, cl, "Jobs")) == bodies


def test_bad_requests_are_refused_with_a_clear_error(one_queue):
    zk, cl = one_queue
    with pytest.raises(Exception, match="invisible_duration_ms"):
        SimpleConsumer("w", subscriptions="Jobs", zookeeper=zk, cluster=cl, invisible_duration_ms=10)
    with pytest.raises(Exception, match="max_deliveries"):
        SimpleConsumer("w", subscriptions="Jobs", zookeeper=zk, cluster=cl, max_deliveries=0)
    with consumer(zk, cl) as c:
        with pytest.raises(BadRequestError, match="received"):
            c.ack(object())
    with SimpleConsumer("w", subscriptions="NoSuchTopic", zookeeper=zk, cluster=cl) as c:
        with pytest.raises(Exception, match="NoSuchTopic"):
            c.receive(1)


def test_the_state_survives_a_broker_restart(local_cluster):
    b = local_cluster.add_broker("broker-a")
    local_cluster.create_topic("Jobs", queues=2)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    bodies = [b"r%02d" % i for i in range(40)]
    send(zk, cl, "Jobs", bodies)
    with consumer(zk, cl, invisible_duration_ms=60_000) as holder:
        acked = drain(holder, 20)
        held = []
        while len(held) < 10:
            held += holder.receive(10 - len(held), wait_ms=1000)
        acked_bodies = {m.body for m in acked}
        b.restart()
        wait_for(lambda: master_id(zk, cl) == 0, what="broker-a master again")
        with consumer(zk, cl, invisible_duration_ms=60_000) as c:
            rest = drain(c, 10, timeout_s=10)
            # the 10 still held are not handed out before their deadline
            assert c.receive(10, wait_ms=500) == []
        held_bodies = {m.body for m in held}
        # the held receipts still work after the restart, in the holder's hands
        for m in held:
            holder.ack(m)
    rest_bodies = {m.body for m in rest}
    assert not rest_bodies & acked_bodies, "an acked message came back after a restart"
    assert not rest_bodies & held_bodies, "an in-flight message was handed out early"
    assert acked_bodies | held_bodies | rest_bodies == set(bodies)


HOLDER = """
import sys, time
from duomq.client import SimpleConsumer
c = SimpleConsumer("workers", subscriptions="Jobs", zookeeper=sys.argv[1], cluster=sys.argv[2],
                   consume_from="first", invisible_duration_ms=int(sys.argv[3]))
held = []
while len(held) < 100:
    held += c.receive(100 - len(held), wait_ms=1000)
print("HELD", " ".join(m.body.decode() for m in held), flush=True)
time.sleep(600)
"""


def test_a_killed_consumers_messages_go_to_the_others_after_their_invisible_time(one_queue):
    import subprocess
    import sys
    zk, cl = one_queue
    bodies = [b"k%03d" % i for i in range(150)]
    send(zk, cl, "Jobs", bodies)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, zk, cl, "2000"],
                              stdout=subprocess.PIPE, text=True)
    try:
        line = holder.stdout.readline()
        assert line.startswith("HELD"), line
        held = {b.encode() for b in line.split()[1:]}
        assert len(held) == 100
        holder.kill()                                     # kill -9 with 100 in flight
        holder.wait(10)
        t_kill = time.monotonic()
        counts: dict[bytes, list[int]] = {}
        with consumer(zk, cl) as a, consumer(zk, cl) as b:
            deadline = time.monotonic() + 30
            while sum(len(v) for v in counts.values()) < 150 and time.monotonic() < deadline:
                for c in (a, b):
                    for m in c.receive(16, wait_ms=200):
                        if m.body in held:
                            assert time.monotonic() - t_kill > 0.5, "delivered before its time"
                        counts.setdefault(m.body, []).append(m.delivery_count)
                        c.ack(m)
    finally:
        holder.kill()
        holder.wait(10)
        holder.stdout.close()
    assert sorted(counts) == bodies, "a message was lost"
    assert all(len(v) == 1 for v in counts.values()), "a message was acked twice"
    assert {b for b, v in counts.items() if v == [2]} == held
    assert {b for b, v in counts.items() if v == [1]} == set(bodies) - held


@pytest.mark.slow
def test_a_failover_of_a_sync_pair_redelivers_no_acked_message_and_loses_none(local_cluster):
    """kill -9 of a SYNC pair's master while three consumers read and ack;
    the drill's checker judges the whole history (every consumer, both
    queues, both terms): every message acked once (or its ack unanswered by
    the dying master: it may have been taken), none delivered after an ack
    of it succeeded."""
    from duomq.drill.share_checker import Event, accounted, check_share
    sync = dict(flush="SYNC_FLUSH", replication="SYNC")
    master = local_cluster.add_broker("broker-a", 0, **sync)
    local_cluster.add_broker("broker-a", 1, **sync)
    local_cluster.create_topic("Jobs", queues=2)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    wait_for(lambda: master_id(zk, cl) == 0, 15, "broker 0 master")
    wait_for(lambda: isr_members(zk, cl) == {0, 1}, 20, "the slave in sync")
    bodies = [b"f%04d" % i for i in range(600)]
    send(zk, cl, "Jobs", bodies)
    events: list[Event] = []          # one history of every consumer, in order
    errors: list[str] = []
    stop = threading.Event()

    def work(reader: int):
        with consumer(zk, cl, invisible_duration_ms=3000) as c:
            while not stop.is_set():
                try:
                    ms = c.receive(8, wait_ms=300)
                except DuomqError as exc:
                    errors.append(type(exc).__name__)
                    time.sleep(0.1)
                    continue
                for m in ms:
                    events.append(Event("d", m.body, m.delivery_count, reader))
                    try:
                        c.ack(m)
                        events.append(Event("a", m.body, m.delivery_count, reader))
                    except ReceiptExpiredError:
                        events.append(Event("r", m.body, m.delivery_count, reader))
                    except DuomqError as exc:    # no answer: the ack may have been taken
                        errors.append(type(exc).__name__)
                        events.append(Event("u", m.body, m.delivery_count, reader))
                time.sleep(0.005)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    try:
        wait_for(lambda: len(accounted(list(events))) >= 150, 30, "consumption under way")
        master.kill()                                      # kill -9 mid-stream
        wait_for(lambda: master_id(zk, cl) == 1, 30, "broker 1 takes over")
        master.start()               # back as its slave: SYNC changes need one in sync
        try:
            wait_for(lambda: accounted(list(events)) >= set(bodies), 60, "every message acked")
        except AssertionError:
            raise AssertionError(f"{len(accounted(list(events)))} of {len(bodies)} acked; "
                                 f"errors {Counter(errors)}") from None
        time.sleep(4)              # past the invisible time: anything wrongly held comes back
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    figures, problems = check_share(list(events), set(bodies), set())
    assert problems == [], (problems, figures)
    assert figures["redeliveries"] <= 3 * 8, figures   # at most what was in flight at the kill
    assert errors, "the kill was not felt: the test did not test a failover"


def test_group_describe_shows_what_a_share_group_holds(one_queue):
    import json

    from duomq.testing.harness import run_cli
    zk, cl = one_queue
    send(zk, cl, "Jobs", [b"d%d" % i for i in range(10)])
    with consumer(zk, cl, invisible_duration_ms=200) as c:
        first = c.receive(3, wait_ms=2000)
        time.sleep(0.3)
        again = c.receive(2, wait_ms=2000)                 # two of them a second time
        assert [m.delivery_count for m in again] == [2, 2]
        c.change_invisible_duration(again[0], 60_000)
        c.change_invisible_duration(again[1], 60_000)
        out = json.loads(run_cli("group", "describe", "workers", "--json", "--zookeeper", zk,
                                 "--cluster", cl).stdout)
        [row] = out["share"]
        assert (row["topic"], row["queue"], row["start_offset"], row["next_offset"]) == \
            ("Jobs", 0, 0, 3)
        assert row["held"] == 3 and row["redelivered"] == 2
        assert row["oldest_held_ms"] >= 300
        text = run_cli("group", "describe", "workers", "--zookeeper", zk, "--cluster", cl).stdout
        assert "3 message(s) in flight" in text and "2 redelivered" in text
        assert len(first) == 3


def test_group_delete_forgets_a_share_group(one_queue):
    from duomq.testing.harness import run_cli
    zk, cl = one_queue
    bodies = [b"g%d" % i for i in range(10)]
    send(zk, cl, "Jobs", bodies)
    endpoint = ("--zookeeper", zk, "--cluster", cl)
    with consumer(zk, cl) as c:
        assert len(drain(c, 5)) == 5
        # a share group with a reader is not deleted under it, and nothing changes
        refused = run_cli("group", "delete", "workers", *endpoint, check=False)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "share group 'workers' has 1 reader(s)" in refused.stderr
        assert f"/{c.client_id}" in refused.stderr and "--force" in refused.stderr
        assert sorted(m.body for m in drain(c, 5)) == sorted(bodies[5:])   # state kept
    # its reader closed (and said so): deleted at once
    out = run_cli("group", "delete", "workers", *endpoint)
    assert out.returncode == 0
    with consumer(zk, cl) as c:                    # starts afresh, from the first message
        again = drain(c, 10)
        forced = run_cli("group", "delete", "workers", "--force", *endpoint)
        assert forced.returncode == 0               # --force: under a reader too
    assert sorted(m.body for m in again) == sorted(bodies)
    assert all(m.delivery_count == 1 for m in again)


def test_a_receipt_is_good_only_for_the_consumer_that_received_it(one_queue):
    """Another member of the group cannot ack, release or renew what one
    member holds, nor can anyone with a receipt guessed from the queue,
    offset and delivery count (raw SHARE_ACKs); the holder still can, and
    nothing was changed for it meanwhile. An ack of over 1,024 receipts is
    refused naming the limit; the client splits larger ones."""
    import copy

    from duomq.client.remoting import RemotingClient
    from duomq.common.message import decode_records
    from duomq.proto import pb
    zk, cl = one_queue
    send(zk, cl, "Jobs", [b"m%d" % i for i in range(5)])
    with consumer(zk, cl) as alice, consumer(zk, cl) as bob:
        held = drain(alice, 5, ack=False)
        assert len(held) == 5
        stolen = [copy.copy(m) for m in held]      # every field of alice's receipts
        for change in (bob.ack, bob.nack, lambda ms: bob.change_invisible_duration(ms[0], 60_000)):
            with pytest.raises(ReceiptExpiredError, match="held by another consumer"):
                change(stolen)
        address = bob.master_address("broker-a", "Jobs")
        raw = RemotingClient("forger")
        try:
            for key in (0, held[0].receipt_key ^ 1, held[0].receipt_key):
                req = pb.ShareAckRequest(consumer_group="workers", topic="Jobs",
                                         action=pb.ACCEPT, client_id="forger")
                req.receipts.add(queue_id=0, queue_offset=held[0].queue_offset,
                                 delivery_count=1, key=key)
                status, error, resp = raw.call(address, pb.SHARE_ACK, req, 5)
                assert status == pb.OK and resp.statuses[0] == pb.RECEIPT_EXPIRED, (key, error)
            big = pb.ShareAckRequest(consumer_group="workers", topic="Jobs",
                                     action=pb.ACCEPT, client_id="forger")
            for i in range(1025):
                big.receipts.add(queue_id=0, queue_offset=i, delivery_count=1)
            status, error, _ = raw.call(address, pb.SHARE_ACK, big, 5)
            assert status == pb.BAD_REQUEST and "at most 1024" in error, error
            # a client of an earlier release (no client id, no key): its pops are its own
            send(zk, cl, "Jobs", [b"legacy"])
            status, _, popped = raw.call(address, pb.POP, pb.PopRequest(
                consumer_group="workers", topic="Jobs", max_messages=1, invisible_ms=30_000), 5)
            assert status == pb.OK and popped.receipt_key == 0 and popped.count == 1
            m = decode_records(popped.records, "broker-a")[0]
            for client_id, want in (("someone", pb.RECEIPT_EXPIRED), ("", pb.OK)):
                ack = pb.ShareAckRequest(consumer_group="workers", topic="Jobs",
                                         action=pb.ACCEPT, client_id=client_id)
                ack.receipts.add(queue_id=0, queue_offset=m.queue_offset, delivery_count=1)
                status, error, resp = raw.call(address, pb.SHARE_ACK, ack, 5)
                assert status == pb.OK and resp.statuses[0] == want, (client_id, error)
        finally:
            raw.close()
        assert bob.receive(5, wait_ms=300) == []          # still alice's: none came back
        alice.ack(held)                                   # the holder's receipts hold
        assert sorted(m.body for m in held) == [b"m%d" % i for i in range(5)]
        with Producer(zookeeper=zk, cluster=cl) as p:
            for lo in (0, 550):
                assert p.send_batch([Message("Jobs", b"b%d" % i)
                                     for i in range(lo, lo + 550)]).ok
        many = drain(alice, 1100, ack=False)
        alice.ack(many)                                   # in two requests
        assert alice.receive(5, wait_ms=300) == [] and bob.receive(5, wait_ms=300) == []

