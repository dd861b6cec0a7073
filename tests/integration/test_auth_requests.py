"""Every request type against every permission it needs, on a secured
pair: for each type of ``auth.acl.NEEDS`` and each permission the request
needs (what its fields name, and what it touches: the stored message a send
back or a read by offset names), a user holding all the others is refused
with NOT_AUTHORIZED naming it, and nothing changes (the log's end, the
group's offset, the pending transaction); a user with exactly those
permissions succeeds. Then the attacks a registered user tried: a send back
copying another topic's message into its group's queues, a heartbeat
naming a producer group to receive check-backs, a client id taken over."""

import time

import pytest

from duomq.auth.acl import NEEDS, Permission, Policy, needs, topic_read
from duomq.auth.credentials import Credentials
from duomq.auth.user import User
from duomq.auth.users import UserAdmin
from duomq.client import Message, Producer, TransactionProducer
from duomq.client.remoting import RemotingClient
from duomq.common.curve import KeyPair
from duomq.common.errors import AuthenticationError
from duomq.common.message import MessageQueue
from duomq.common.transaction import TransactionState, parse_transaction_id
from duomq.coordinator import zk as zkutil
from duomq.format import record as rec
from duomq.proto import codec, pb
from duomq.testing.harness import master_id, wait_for

pytestmark = pytest.mark.integration
GROUP = "billing"


class Users:
    """Users added straight to ZooKeeper, each with its own client."""

    def __init__(self, zk, cl, admin_file: str):
        self.admin = Credentials.load(admin_file)
        self.zk = zkutil.connect(zk)
        self.users = UserAdmin(self.zk, cl)
        self.clients: list[RemotingClient] = []
        self.keys: dict[str, KeyPair] = {}
        self.n = 0

    def client(self, allow: list[Permission], address: str,
               quotas: tuple = ()) -> tuple[str, RemotingClient]:
        """A new user with the permissions ``allow`` (and its own
        ``quotas``), and a client of it that the broker at ``address``
        admits (it learns of users by watch)."""
        self.n += 1
        name, keys = f"u{self.n}", KeyPair.new()
        self.keys[name] = keys
        self.users.add(User(name, keys.public, Policy(tuple(allow)), quotas=quotas))
        deadline = time.monotonic() + 10
        while True:
            c = RemotingClient(name, Credentials(name, keys, self.admin.broker_public_key))
            try:
                c.call(address, pb.BROKER_STATUS, pb.BrokerStatusRequest(), 5)
                break
            except AuthenticationError:
                c.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self.clients.append(c)
        return name, c

    def again(self, name: str) -> RemotingClient:
        """Another client (its own connection) of the user ``name``."""
        c = RemotingClient(name, Credentials(name, self.keys[name],
                                             self.admin.broker_public_key))
        self.clients.append(c)
        return c

    def close(self):
        for c in self.clients:
            c.close()
        zkutil.close(self.zk)


@pytest.fixture
def world(secured):
    cluster, _keys, admin, master, _slave = secured
    zk, cl = cluster.zookeeper, cluster.cluster
    wait_for(lambda: master_id(zk, cl) == 0, 15, "broker 0 as master")
    with Producer(zookeeper=zk, cluster=cl, credentials=admin) as p:
        sent = p.send(Message("Secret", b"stored", keys="k1"),
                      queue=MessageQueue("Secret", "broker-a", 0))
        assert sent.ok
        timer = p.send(Message("Secret", b"later", deliver_at_ms=int(time.time() * 1000) +
                               3_600_000), queue=MessageQueue("Secret", "broker-a", 0))
        TIMER_HANDLE[0] = timer.recall_handle
    users = Users(zk, cl, admin)
    try:
        yield cluster, admin, master, sent, users
    finally:
        users.close()


TIMER_HANDLE = [""]     # a timer of Secret (the world's): what a recall names


def samples(cl: str, offset: int, half: int, client_id: str) -> dict[int, object]:
    """A request of every type a client may send, naming topic Secret and
    group billing."""
    q = pb.QueueOffset(topic="Secret", queue_id=0, offset=0)
    ref = pb.QueueRef(topic="Secret", queue_id=0)
    pull = pb.PullRequest(consumer_group=GROUP, topic="Secret", queue_id=0, max_messages=1)
    return {
        pb.SEND: pb.SendRequest(topic="Secret", queue_id=0, count=1, producer_group="p",
                                records=rec.encode_record(b"Secret", b"", b"", b"", b"x",
                                                          int(time.time() * 1000))),
        pb.PULL: pull,
        pb.PULL_MANY: pb.PullManyRequest(pulls=[pull]),
        pb.QUERY_OFFSET: pb.QueryOffsetRequest(topic="Secret", queue_id=0,
                                               query=pb.MAX_OFFSET),
        pb.QUERY_BY_KEY: pb.QueryByKeyRequest(topic="Secret", key="k1"),
        pb.COMMIT_OFFSET: pb.CommitOffsetRequest(consumer_group=GROUP, offsets=[
            pb.QueueOffset(topic="Secret", queue_id=0, offset=1)]),
        pb.FETCH_OFFSET: pb.FetchOffsetRequest(consumer_group=GROUP, queues=[q]),
        pb.LOCK_QUEUES: pb.LockQueuesRequest(consumer_group=GROUP, client_id=client_id,
                                             queues=[ref]),
        pb.UNLOCK_QUEUES: pb.LockQueuesRequest(consumer_group=GROUP, client_id=client_id,
                                               queues=[ref]),
        pb.HEARTBEAT: pb.HeartbeatRequest(client_id=client_id, consumer_groups=[GROUP]),
        pb.SEND_BACK: pb.SendBackRequest(consumer_group=GROUP, physical_offset=offset),
        pb.GET_MESSAGE: pb.GetMessageRequest(physical_offset=offset),
        pb.BROKER_STATUS: pb.BrokerStatusRequest(),
        pb.LIST_TRANSACTIONS: pb.ListTransactionsRequest(),
        pb.END_TRANSACTION: pb.EndTransactionRequest(producer_group="pay", half_offset=half,
                                                     action=pb.ROLLBACK, topic="Secret"),
        pb.DELETE_GROUP: pb.DeleteGroupRequest(consumer_group="gone"),
        pb.BROKER_CONFIG: pb.BrokerConfigRequest(),
        pb.POP: pb.PopRequest(consumer_group=GROUP, topic="Secret", max_messages=1,
                              invisible_ms=30_000, from_first=True),
        pb.SHARE_ACK: pb.ShareAckRequest(consumer_group=GROUP, topic="Secret", action=pb.ACCEPT,
                                         receipts=[pb.Receipt(queue_id=0, queue_offset=0,
                                                              delivery_count=1)]),
        pb.RECALL: pb.RecallRequest(topic="Secret", handle=TIMER_HANDLE[0]),
    }


def touched(type_: int, cl: str) -> list[Permission]:
    """What the request needs beyond its fields: the stored message's topic."""
    if type_ == pb.SEND_BACK:
        return topic_read("Secret", GROUP)
    if type_ == pb.GET_MESSAGE:
        return topic_read("Secret", None)
    return []


def state(admin: RemotingClient, address: str) -> tuple:
    """What a refused request must not change: the log's end, the group's
    offset on Secret/0, the transactions pending."""
    _, _, st = admin.call(address, pb.BROKER_STATUS, pb.BrokerStatusRequest(), 5)
    _, _, off = admin.call(address, pb.FETCH_OFFSET, pb.FetchOffsetRequest(
        consumer_group=GROUP, queues=[pb.QueueOffset(topic="Secret", queue_id=0)]), 5)
    return st.max_physical_offset, tuple(o.offset for o in off.offsets), st.transactions_pending


def test_every_request_type_against_every_permission_it_needs(world):
    cluster, admin_file, master, sent, users = world
    zk, cl = cluster.zookeeper, cluster.cluster
    with TransactionProducer("pay", zookeeper=zk, cluster=cl, credentials=admin_file) as tp:
        half = tp.send_in_transaction(Message("Secret", b"half"),
                                      lambda m, a: TransactionState.UNKNOWN)
    _, half_offset = parse_transaction_id(half.transaction_id)
    admin = RemotingClient("admin", Credentials.load(admin_file))
    wait_for(lambda: state(admin, master.address)[2] == 1, 10, "the transaction pending")
    checked = 0
    try:
        for type_ in sorted(NEEDS):
            name = pb.RequestType.Name(type_)
            msg = samples(cl, sent.physical_offsets[0], half_offset, "")[type_]
            needed = list(dict.fromkeys([*needs(type_, msg, cl), *touched(type_, cl)]))
            for missing in needed:
                user, client = users.client([p for p in needed if p != missing], master.address)
                req = samples(cl, sent.physical_offsets[0], half_offset, f"c-{user}")[type_]
                before = state(admin, master.address)
                status, error, _ = client.call(master.address, type_, req, 5)
                assert status == pb.NOT_AUTHORIZED, (name, missing, status, error)
                assert f"lacks the permission {missing}" in error, (name, error)
                assert state(admin, master.address) == before, (name, missing)
                checked += 1
            user, client = users.client(needed, master.address)
            req = samples(cl, sent.physical_offsets[0], half_offset, f"c-{user}")[type_]
            status, error, _ = client.call(master.address, type_, req, 5)
            assert status == pb.OK, (name, needed, status, error)
    finally:
        admin.close()
    print(f"{checked} refusals over {len(NEEDS)} request types")


class WithUnknownField:
    """A request serialized with a field its message does not have: the C
    reader of SEND (proto/_wire.c) leaves such a frame to protobuf."""

    def __init__(self, message):
        self.message = message

    def SerializeToString(self) -> bytes:    # noqa: N802 (what codec calls)
        return self.message.SerializeToString() + b"\x50\x01"   # field 10, varint 1


def test_a_send_is_checked_whichever_reader_reads_it(world):
    """Both readers of SEND (C for the common frame, protobuf for the rest)
    go through the same check: a user without Pub is refused by either with
    nothing stored, a user with it stored by either."""
    cluster, admin_file, master, sent, users = world
    send = samples(cluster.cluster, 0, 0, "")[pb.SEND]
    odd = WithUnknownField(send)
    assert codec.parse_send(codec.encode_request(1, pb.SEND, send)) is not None
    assert codec.parse_send(codec.encode_request(1, pb.SEND, odd)) is None
    admin = RemotingClient("admin", Credentials.load(admin_file))
    try:
        _user, reader = users.client([Permission("Topic", "Secret", "Sub")], master.address)
        for req in (send, odd):
            before = state(admin, master.address)
            status, error, _ = reader.call(master.address, pb.SEND, req, 5)
            assert status == pb.NOT_AUTHORIZED and "Topic:Secret:Pub" in error, error
            assert state(admin, master.address) == before
        _user, writer = users.client([Permission("Topic", "Secret", "Pub")], master.address)
        for req in (send, odd):
            before = state(admin, master.address)[0]
            status, error, resp = writer.call(master.address, pb.SEND, req, 5)
            assert status == pb.OK, error
            assert state(admin, master.address)[0] > before and len(resp.physical_offsets) == 1
    finally:
        admin.close()


def test_a_send_back_copies_only_what_its_user_may_read(world):
    cluster, admin_file, master, sent, users = world
    zk, cl = cluster.zookeeper, cluster.cluster
    cluster.create_topic("Payroll", 1)
    with Producer(zookeeper=zk, cluster=cl, credentials=admin_file) as p:
        pay = p.send(Message("Payroll", b"salaries"))
    with TransactionProducer("pay", zookeeper=zk, cluster=cl, credentials=admin_file) as tp:
        half = tp.send_in_transaction(Message("Payroll", b"half"),
                                      lambda m, a: TransactionState.UNKNOWN)
    _, half_offset = parse_transaction_id(half.transaction_id)
    admin = RemotingClient("admin", Credentials.load(admin_file))
    user, reader = users.client([Permission("Topic", "Secret", "Sub"),
                                 Permission("Group", GROUP, "Sub")], master.address)
    try:
        before = state(admin, master.address)
        status, error, _ = reader.call(master.address, pb.SEND_BACK, pb.SendBackRequest(
            consumer_group=GROUP, physical_offset=pay.physical_offsets[0], dead_letter=True), 5)
        assert status == pb.NOT_AUTHORIZED and "Topic:Payroll:Sub" in error
        # a half message is nobody's to send back, not even the admin's
        for who in (reader, admin):
            status, error, _ = who.call(master.address, pb.SEND_BACK, pb.SendBackRequest(
                consumer_group=GROUP, physical_offset=half_offset, dead_letter=True), 5)
            assert status == pb.BAD_REQUEST and "does not consume" in error, error
        assert state(admin, master.address) == before            # nothing copied
        status, _, resp = reader.call(master.address, pb.SEND_BACK, pb.SendBackRequest(
            consumer_group=GROUP, physical_offset=sent.physical_offsets[0], dead_letter=True), 5)
        assert status == pb.OK and resp.topic == f"%DLQ%{GROUP}"   # its own topic: allowed
    finally:
        admin.close()


def test_check_backs_reach_only_producers_allowed_to_publish_the_topic(secured, tmp_path):
    cluster, _keys, admin_file, _master, _slave = secured
    zk, cl = cluster.zookeeper, cluster.cluster
    for b in list(cluster.brokers):
        b.stop()
        b.settings.update(transaction_timeout_ms=300, transaction_check_interval_ms=200)
        b.start(wait=False)
    for b in cluster.brokers:
        b.wait_registered()
    wait_for(lambda: master_id(zk, cl) is not None, 15, "a master")
    users = Users(zk, cl, admin_file)
    try:
        address = next(b.address for b in cluster.brokers if b.broker_id == master_id(zk, cl))
        _, stranger = users.client([], address)             # registered, no right at all
        _, payer = users.client([Permission("Topic", "Secret", "Pub")], address)
        got: dict[str, list] = {"stranger": [], "payer": []}
        stranger.on_push = lambda addr, frame: got["stranger"].append(frame)
        hb = pb.HeartbeatRequest(client_id="stranger-1", producer_groups=["paytx"])
        assert stranger.request(address, pb.HEARTBEAT, hb, 5).result()[0] == pb.OK
        with TransactionProducer("paytx", zookeeper=zk, cluster=cl,
                                 credentials=admin_file) as tp:
            r = tp.send_in_transaction(Message("Secret", b"pending body"),
                                       lambda m, a: TransactionState.UNKNOWN)
            assert r.send_result.ok
        time.sleep(2.5)                      # several check rounds: nobody but the stranger
        assert got["stranger"] == [], "a check-back reached a user without Pub on its topic"
        payer.on_push = lambda addr, frame: got["payer"].append(frame)
        hb = pb.HeartbeatRequest(client_id="payer-1", producer_groups=["paytx"])
        assert payer.request(address, pb.HEARTBEAT, hb, 5).result()[0] == pb.OK
        wait_for(lambda: got["payer"], 10, "the check-back to reach the allowed producer")
        assert got["stranger"] == []
        # a client id is its user's own: the stranger naming the payer's first
        # (ids are readable by every member) gets a client of its own, and the
        # payer's heartbeats and check-backs go on
        got["payer"].clear()
        hb = pb.HeartbeatRequest(client_id="payer-1", producer_groups=["paytx"])
        assert stranger.request(address, pb.HEARTBEAT, hb, 5).result()[0] == pb.OK
        assert payer.request(address, pb.HEARTBEAT, hb, 5).result()[0] == pb.OK
        wait_for(lambda: got["payer"], 10, "check-backs to go on reaching the payer")
        assert got["stranger"] == []
        # nor does a user take another's queue locks by naming its client id
        _, reader = users.client([Permission("Topic", "Secret", "Sub"),
                                  Permission("Group", GROUP, "Sub")], address)
        _, rival = users.client([Permission("Topic", "Secret", "Sub"),
                                 Permission("Group", GROUP, "Sub")], address)

        def lock(who, type_=pb.LOCK_QUEUES):
            req = pb.LockQueuesRequest(consumer_group=GROUP, client_id="reader-1",
                                       queues=[pb.QueueRef(topic="Secret", queue_id=0)])
            status, error, resp = who.call(address, type_, req, 5)
            assert status == pb.OK, error
            return [(q.topic, q.queue_id) for q in resp.locked]
        assert lock(reader) == [("Secret", 0)]
        assert lock(rival) == []                          # held by the reader's client
        lock(rival, pb.UNLOCK_QUEUES)                     # unlocks only its own
        assert lock(reader) == [("Secret", 0)] and lock(rival) == []
    finally:
        users.close()


def test_no_user_reads_or_writes_a_reserved_topic_whatever_its_wildcards(world):
    """The broker's own topics as they exist once used (a pending
    transaction's half message, a delayed message, the share log) and
    another group's retry and dead-letter topics: pulled, popped, asked for
    offsets, looked up by key, read by offset, sent to, by a user granted
    `Topic:R*:Sub` (the probe's), one granted everything a policy can name,
    and the admin: all refused, nothing changed."""
    from duomq.client import SimpleConsumer
    from duomq.common.names import HALF_TOPIC, OP_TOPIC, SCHEDULE_TOPIC, SHARE_LOG_TOPIC
    from duomq.coordinator.paths import ZkPaths
    cluster, admin_file, master, _sent, users = world
    zk, cl = cluster.zookeeper, cluster.cluster
    with TransactionProducer("pay", zookeeper=zk, cluster=cl, credentials=admin_file) as tp:
        half = tp.send_in_transaction(Message("Secret", b"pending half"),
                                      lambda m, a: TransactionState.UNKNOWN)
        tp.send_in_transaction(Message("Secret", b"rolled back"),
                               lambda m, a: TransactionState.ROLLBACK)
    with Producer(zookeeper=zk, cluster=cl, credentials=admin_file) as p:
        delayed = p.send(Message("Secret", b"later", delay_level=18))
    with SimpleConsumer("sharers", subscriptions="Secret", zookeeper=zk, cluster=cl, credentials=admin_file,
                        consume_from="first") as sc:
        sc.receive(1, wait_ms=2000)
    admin = RemotingClient("admin", Credentials.load(admin_file))
    back = pb.SendBackRequest(consumer_group="other", physical_offset=_sent.physical_offsets[0],
                              dead_letter=True)          # group other's first failure
    assert admin.call(master.address, pb.SEND_BACK, back, 5)[0] == pb.OK
    paths = ZkPaths(cl)
    wait_for(lambda: all(users.zk.exists(paths.topic(t)) for t in ("%RETRY%other", "%DLQ%other")),
             15, "the other group's retry and dead-letter topics")
    stored = {q.topic for q in admin.call(master.address, pb.BROKER_STATUS,
                                          pb.BrokerStatusRequest(), 5)[2].queues}
    assert {HALF_TOPIC, OP_TOPIC, SCHEDULE_TOPIC, SHARE_LOG_TOPIC} <= stored, stored
    reserved = [HALF_TOPIC, OP_TOPIC, SCHEDULE_TOPIC, SHARE_LOG_TOPIC, "%RETRY%other",
                "%DLQ%other"]
    stored_at = {HALF_TOPIC: parse_transaction_id(half.transaction_id)[1],
                 SCHEDULE_TOPIC: delayed.physical_offsets[0]}
    _, probe = users.client([Permission.parse("Topic:R*:Sub"),
                             Permission.parse("Group:*:Sub")], master.address)
    _, everything = users.client([Permission.parse(t) for t in (
        "Topic:*:All", "Group:*:All", "Cluster:*:All")], master.address)
    refused = 0
    try:
        for who in (probe, everything, admin):
            for topic in reserved:
                pull = pb.PullRequest(consumer_group=GROUP, topic=topic, queue_id=0,
                                      max_messages=32)
                asks = [(pb.PULL, pull), (pb.PULL_MANY, pb.PullManyRequest(pulls=[pull])),
                        (pb.QUERY_OFFSET, pb.QueryOffsetRequest(topic=topic, queue_id=0,
                                                                query=pb.MAX_OFFSET)),
                        (pb.QUERY_BY_KEY, pb.QueryByKeyRequest(topic=topic, key="k1")),
                        (pb.POP, pb.PopRequest(consumer_group=GROUP, topic=topic,
                                               max_messages=8, invisible_ms=30_000,
                                               from_first=True)),
                        (pb.SEND, pb.SendRequest(topic=topic, queue_id=0, count=1,
                                                 records=rec.encode_record(
                                                     topic.encode(), b"", b"", b"", b"x",
                                                     int(time.time() * 1000))))]
                if topic in stored_at:
                    asks.append((pb.GET_MESSAGE, pb.GetMessageRequest(
                        physical_offset=stored_at[topic])))
                for type_, req in asks:
                    before = state(admin, master.address)
                    status, error, resp = who.call(master.address, type_, req, 5)
                    assert status in (pb.NOT_AUTHORIZED, pb.INVALID_NAME), \
                        (topic, pb.RequestType.Name(type_), status, error)
                    assert not getattr(resp, "records", b""), (topic, type_)
                    assert state(admin, master.address) == before, (topic, type_)
                    refused += 1
    finally:
        admin.close()
    assert refused == 3 * (6 * len(reserved) + len(stored_at))


def test_each_quota_bounds_what_one_user_makes_and_no_other(world):
    """A user with its own quotas (groups 3, share_groups 2, held_pops 2)
    and every group right: each new group past its quota is refused,
    QUOTA_EXCEEDED naming the quota, by a heartbeat, a send back and an
    offset commit alike, and makes no group node; share groups past 2 are
    not popped from; a third held POP is refused; groups in use stay
    usable; another user (the broker's default quotas) is not touched."""
    from duomq.coordinator.paths import ZkPaths
    cluster, _admin_file, master, sent, users = world
    cl = cluster.cluster
    rights = [Permission.parse(t) for t in ("Topic:Secret:All", "Group:*:Sub")]
    name, c = users.client(rights, master.address,
                           (("groups", 3), ("held_pops", 2), ("share_groups", 2)))
    paths = ZkPaths(cl)

    def nodes():
        return set(users.zk.get_children(paths.consumer_groups)) \
            if users.zk.exists(paths.consumer_groups) else set()

    def call(type_, req):
        return c.call(master.address, type_, req, 10)

    for g in ("q1", "q2", "q3"):
        hb = pb.HeartbeatRequest(client_id="c1", consumer_groups=[g])
        assert call(pb.HEARTBEAT, hb)[0] == pb.OK
    wait_for(lambda: {"q1", "q2", "q3"} <= nodes(), 10, "the group nodes of the first three")
    before = nodes()
    offset = pb.QueueOffset(topic="Secret", queue_id=0, offset=0)
    for type_, req in (
            (pb.HEARTBEAT, pb.HeartbeatRequest(client_id="c1", consumer_groups=["q4"])),
            (pb.SEND_BACK, pb.SendBackRequest(consumer_group="q5", dead_letter=True,
                                              physical_offset=sent.physical_offsets[0])),
            (pb.COMMIT_OFFSET, pb.CommitOffsetRequest(consumer_group="q6", offsets=[offset]))):
        status, error, _ = call(type_, req)
        assert status == pb.QUOTA_EXCEEDED, (type_, status, error)
        assert f"user {name!r} uses 3 consumer groups" in error and "quota groups (3)" in error
    time.sleep(0.5)
    assert nodes() == before                              # no node for q4, q5 or q6
    assert not users.zk.exists(paths.topic("%DLQ%q5"))
    assert call(pb.COMMIT_OFFSET, pb.CommitOffsetRequest(consumer_group="q1",
                                                         offsets=[offset]))[0] == pb.OK
    # share groups: two, then refused
    for g, want in (("s1", pb.OK), ("s2", pb.OK), ("s3", pb.QUOTA_EXCEEDED)):
        pop = pb.PopRequest(consumer_group=g, topic="Secret", max_messages=1,
                            invisible_ms=30_000, client_id="c1")
        status, error, _ = call(pb.POP, pop)
        assert status in ((pb.OK, pb.NO_NEW_MESSAGE) if want == pb.OK else (want,)), \
            (g, status, error)
    assert "quota share_groups (2)" in error
    # held pops: two held at once (a share group at its end waits), the third refused
    held = [c.request(master.address, pb.POP, pb.PopRequest(
        consumer_group="s1", topic="Secret", max_messages=1, invisible_ms=30_000,
        max_wait_ms=5000, client_id=f"h{i}"), 10) for i in range(2)]
    time.sleep(0.3)
    status, error, _ = call(pb.POP, pb.PopRequest(consumer_group="s1", topic="Secret",
                                                  max_messages=1, invisible_ms=30_000,
                                                  max_wait_ms=5000, client_id="h2"))
    assert status == pb.QUOTA_EXCEEDED and "quota held_pops (2)" in error, (status, error)
    assert all(f.result(10)[0] == pb.NO_NEW_MESSAGE for f in held)
    # open transactions: two half messages left open, the third refused until one ends
    _, t = users.client(rights, master.address, (("open_transactions", 2),))
    props = rec.encode_properties({"TRAN_MSG": "true", "PGROUP": "pg",
                                   "TRAN_USER": "someone-else"})      # forged: dropped

    def half(body: bytes):
        req = pb.SendRequest(topic="Secret", queue_id=0, count=1, producer_group="pg",
                             scheduled=True, records=rec.encode_record(
                                 b"Secret", b"", b"", props, body, int(time.time() * 1000)))
        return t.call(master.address, pb.SEND, req, 10)
    offsets = []
    for i in range(2):
        status, error, resp = half(b"h%d" % i)
        assert status == pb.OK, error
        offsets.append(resp.physical_offsets[0])
    status, error, _ = half(b"h2")
    assert status == pb.QUOTA_EXCEEDED and "quota open_transactions (2)" in error, error
    end = pb.EndTransactionRequest(producer_group="pg", half_offset=offsets[0],
                                   action=pb.ROLLBACK, topic="Secret")
    assert t.call(master.address, pb.END_TRANSACTION, end, 10)[0] == pb.OK
    assert half(b"h3")[0] == pb.OK
    # client ids: one user cannot fill the broker's client table for the others
    _, cl_user = users.client(rights, master.address, (("clients", 2),))
    for cid, want in (("k1", pb.OK), ("k2", pb.OK), ("k1", pb.OK), ("k3", pb.QUOTA_EXCEEDED)):
        status, error, _ = cl_user.call(master.address, pb.HEARTBEAT,
                                        pb.HeartbeatRequest(client_id=cid), 10)
        assert status == want, (cid, status, error)
    assert "quota clients (2)" in error
    # connections: a user's third connection is refused, its first two go on
    cn_name, first = users.client(rights, master.address, (("connections", 2),))
    second, third = users.again(cn_name), users.again(cn_name)

    def beat(c, cid: str) -> tuple:
        return c.call(master.address, pb.HEARTBEAT, pb.HeartbeatRequest(client_id=cid), 10)
    assert beat(second, "n2")[0] == pb.OK          # the first counted at its first request
    status, error, _ = beat(third, "n3")
    assert status == pb.QUOTA_EXCEEDED and "quota connections (2)" in error, (status, error)
    assert "a new one is refused" in error
    assert beat(first, "n1")[0] == pb.OK and beat(second, "n2")[0] == pb.OK
    # another user is not touched by this one's use, and has the broker's defaults
    _, other = users.client(rights, master.address)
    for g in ("q4", "q5", "q6", "q7"):
        hb = pb.HeartbeatRequest(client_id="o1", consumer_groups=[g])
        assert other.call(master.address, pb.HEARTBEAT, hb, 10)[0] == pb.OK
