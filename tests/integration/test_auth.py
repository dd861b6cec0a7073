"""A secured cluster (auth = true): CURVE on both ports with the keys
`duomq auth init` writes, users in ZooKeeper. The admin produces and
consumes, and the slave follows; anonymous clients and unknown keys are
refused at once with a clear error; a plaintext ZeroMQ peer and a client key
posing as a slave get nothing from the replication port while the broker
goes on serving; a removed user's open connection is refused within a
second, and nothing it sent after is stored."""

import json
import os
import pathlib
import socket
import time

import psutil
import pytest
import zmq
from kazoo.exceptions import NoAuthError

from duomq.auth.acl import Policy
from duomq.auth.credentials import Credentials
from duomq.auth.user import User
from duomq.auth.users import UserAdmin
from duomq.client import Message, Producer, PullConsumer, PushConsumer
from duomq.client.remoting import RemotingClient
from duomq.common.curve import KeyPair
from duomq.common.errors import AuthenticationError, AuthorizationError, ConfigError
from duomq.common.message import MessageQueue
from duomq.coordinator import zk as zkutil
from duomq.coordinator.auth_nodes import AuthConfigNode
from duomq.coordinator.paths import ZkPaths
from duomq.coordinator.topics import TopicAdmin
from duomq.coordinator.zk_login import digest_id, user_zk_login
from duomq.drill.netfilter import zookeeper_ports
from duomq.proto import codec, pb
from duomq.testing.harness import read_node, run_cli, wait_for, wait_slaves_hold
from duomq.transport import zmtp

pytestmark = pytest.mark.integration
Q0 = MessageQueue("Secret", "broker-a", 0)


duomq = run_cli


def stored(zk, cl, admin) -> int:
    with PullConsumer("auditor", zookeeper=zk, cluster=cl, credentials=admin) as c:
        return sum(c.max_offset(mq) for mq in c.queues("Secret"))


def test_the_admin_produces_and_the_slave_serves_it(secured):
    cluster, keys, admin, *_ = secured
    zk, cl = cluster.zookeeper, cluster.cluster
    with Producer(zookeeper=zk, cluster=cl, credentials=admin) as p:
        assert p.send_batch([Message("Secret", b"m%d" % i) for i in range(50)], queue=Q0).ok
    wait_slaves_hold(zk, cl, "Secret")
    with PullConsumer("g", zookeeper=zk, cluster=cl, credentials=admin, read_from="slave") as c:
        got = c.pull(Q0, 0, 100).messages
    assert [m.body for m in got] == [b"m%d" % i for i in range(50)]
    assert oct(os.stat(admin).st_mode & 0o777) == "0o600"


def test_a_secured_cluster_keeps_libzmq_and_curve_on_both_sides(secured, monkeypatch):
    """The native transports speak no CURVE: a secured broker's client port
    is libzmq's, a client with credentials uses libzmq even when the
    environment asks for native, and asking for native in its settings is
    refused with the reason."""
    cluster, _keys, admin, master, _ = secured
    zk, cl = cluster.zookeeper, cluster.cluster
    monkeypatch.setenv("DUOMQ_TRANSPORT", "native")
    with Producer(zookeeper=zk, cluster=cl, credentials=admin) as p:
        assert not p.remoting.native
        assert p.send(Message("Secret", b"over CURVE"), queue=Q0).ok
    with pytest.raises(ConfigError, match="secured"):
        Producer(zookeeper=zk, cluster=cl, credentials=admin, transport="native")
    host, port = master.address.removeprefix("tcp://").rsplit(":", 1)
    raw = socket.create_connection((host, int(port)))
    try:                  # a NULL greeting to the client port: libzmq's CURVE ROUTER hangs up
        raw.settimeout(5)
        raw.sendall(zmtp.greeting(False))
        got = b""
        while chunk := raw.recv(4096):
            got += chunk
        # it hung up (recv saw the end before the timeout) having said at most its
        # greeting: no READY, no session
        assert len(got) <= zmtp.GREETING_SIZE and b"READY" not in got
    finally:
        raw.close()


def test_anonymous_and_unknown_keys_fail_at_once(secured, monkeypatch):
    cluster, keys, admin, *_ = secured
    zk, cl = cluster.zookeeper, cluster.cluster
    monkeypatch.delenv("DUOMQ_CREDENTIALS")
    t0 = time.monotonic()
    with pytest.raises(AuthenticationError, match="credentials are needed"):
        Producer(zookeeper=zk, cluster=cl)
    with pytest.raises(AuthenticationError, match="credentials are needed"):
        PullConsumer("g", zookeeper=zk, cluster=cl)
    # an unregistered key, with a ZooKeeper login of its own
    stranger = Credentials("mallory", KeyPair.new(),
                           Credentials.load(admin).broker_public_key, user_zk_login("mallory"))
    path = str(keys / "mallory.json")
    stranger.write(path)
    with pytest.raises(AuthenticationError, match="no such user"):
        Producer(zookeeper=zk, cluster=cl, credentials=path)
    assert time.monotonic() - t0 < 5
    # the CLI: the same words, exit 2
    p = duomq("produce", "Secret", "x", "--zookeeper", zk, "--cluster", cl, check=False)
    assert p.returncode == 2 and "credentials are needed" in p.stderr
    p = duomq("status", "--zookeeper", zk, "--cluster", cl, "--credentials", admin)
    assert "broker-a" in p.stdout


def test_a_key_zookeeper_does_not_know_is_refused_by_the_broker_itself(secured):
    cluster, keys, admin, master, _ = secured
    broker_key = Credentials.load(admin).broker_public_key
    ctx = zmq.Context()
    try:
        d = ctx.socket(zmq.DEALER)
        pair = KeyPair.new()
        d.curve_secretkey, d.curve_publickey, d.curve_serverkey = pair.secret, pair.public, \
            broker_key
        d.setsockopt(zmq.LINGER, 0)
        d.connect(f"tcp://127.0.0.1:{master.port}")
        try_send(d, codec.encode_request(1, pb.BROKER_STATUS, pb.BrokerStatusRequest()))
        assert not d.poll(1500), "a key no user holds got an answer"
        plain = ctx.socket(zmq.DEALER)          # no CURVE at all
        plain.setsockopt(zmq.LINGER, 0)
        plain.connect(f"tcp://127.0.0.1:{master.port}")
        try_send(plain, codec.encode_request(1, pb.BROKER_STATUS, pb.BrokerStatusRequest()))
        assert not plain.poll(1000), "a plaintext peer got an answer"
    finally:
        ctx.destroy(linger=0)
    assert stored(cluster.zookeeper, cluster.cluster, admin) == 0     # still serving


def try_send(sock, data: bytes) -> None:
    """A refused handshake may leave no connection to queue on: never block."""
    try:
        sock.send(data, zmq.NOBLOCK)
    except zmq.Again:
        pass


def _report(offset: int) -> bytes:
    return codec.encode_request(0, pb.HA_REPORT, pb.HaReport(
        broker_id=7, max_offset=offset, acked_offset=offset, address="tcp://x:1", epoch=1))


def test_the_replication_port_gives_nothing_to_plaintext_or_client_keys(secured):
    cluster, keys, admin, master, _ = secured
    zk, cl = cluster.zookeeper, cluster.cluster
    with Producer(zookeeper=zk, cluster=cl, credentials=admin) as p:
        assert p.send_batch([Message("Secret", b"x" * 100)] * 100, queue=Q0).ok
    creds = Credentials.load(admin)
    ctx = zmq.Context()
    try:
        plain = ctx.socket(zmq.DEALER)
        plain.setsockopt(zmq.LINGER, 0)
        plain.connect(f"tcp://127.0.0.1:{master.ha_port}")
        posing = ctx.socket(zmq.DEALER)     # the admin's own key, posing as a slave
        posing.setsockopt(zmq.LINGER, 0)
        posing.curve_secretkey, posing.curve_publickey = creds.keys.secret, creds.keys.public
        posing.curve_serverkey = creds.broker_public_key
        posing.connect(f"tcp://127.0.0.1:{master.ha_port}")
        for sock in (plain, posing):
            try_send(sock, _report(0))
        time.sleep(1.5)
        assert not plain.poll(0) and not posing.poll(0), "the log leaked"
    finally:
        ctx.destroy(linger=0)
    # the broker goes on serving: the slave still follows, clients still send
    with Producer(zookeeper=zk, cluster=cl, credentials=admin) as p:
        assert p.send(Message("Secret", b"after"), queue=Q0).ok
    wait_slaves_hold(zk, cl, "Secret")


def test_a_removed_user_is_refused_within_a_second(secured, tmp_path):
    cluster, keys, admin, *_ = secured
    zk, cl = cluster.zookeeper, cluster.cluster
    bob = str(tmp_path / "bob.json")
    duomq("auth", "user", "add", "bob", "--allow", "Topic:Secret:Pub", "--out", bob,
          "--zookeeper", zk, "--cluster", cl)
    listed = duomq("auth", "user", "list", "--json", "--zookeeper", zk, "--cluster", cl).stdout
    assert '"bob"' in listed and "Topic:Secret:Pub" in listed
    with Producer(zookeeper=zk, cluster=cl, credentials=bob) as p:
        assert p.send(Message("Secret", b"before"), queue=Q0).ok
        duomq("auth", "user", "remove", "bob", "--zookeeper", zk, "--cluster", cl)
        t0 = time.monotonic()                     # the user's node is gone from ZooKeeper
        wait_for(lambda: _refused(p), 5, "bob's sends refused")
        # (from the CLI's return, not its start: a start and ZooKeeper session,
        # ~0.4 s on a quiet machine, took most of 2.9 s under the suite's load
        # once; the broker hears the removal through a watch)
        assert time.monotonic() - t0 < 1.5
        held = stored(zk, cl, admin)
        for _ in range(10):                       # refused: nothing of it is stored
            assert _refused(p)
    assert stored(zk, cl, admin) == held
    with pytest.raises(AuthenticationError, match="no such user"):
        Producer(zookeeper=zk, cluster=cl, credentials=bob)


def test_a_rotated_key_replaces_the_old_one(secured, tmp_path):
    cluster, keys, admin, *_ = secured
    zk, cl = cluster.zookeeper, cluster.cluster
    old, new = str(tmp_path / "carol-old.json"), str(tmp_path / "carol-new.json")
    conn = zkutil.connect(zk)
    try:
        pair, login = KeyPair.new(), user_zk_login("carol")
        UserAdmin(conn, cl).add(User("carol", pair.public, Policy.parse(["Topic:*:All"]),
                                     digest_id(*login["digest"].split(":", 1))))
        Credentials("carol", pair, Credentials.load(admin).broker_public_key, login).write(old)
    finally:
        zkutil.close(conn)
    with Producer(zookeeper=zk, cluster=cl, credentials=old) as p:
        assert p.send(Message("Secret", b"1"), queue=Q0).ok
        duomq("auth", "user", "update", "carol", "--rotate", "--out", new, "--zookeeper", zk,
              "--cluster", cl)
        wait_for(lambda: _refused(p), 5, "the old key refused")
    with Producer(zookeeper=zk, cluster=cl, credentials=new) as p:
        assert p.send(Message("Secret", b"2"), queue=Q0).ok
    with pytest.raises(AuthenticationError, match="rotated"):
        Producer(zookeeper=zk, cluster=cl, credentials=old)


def _refused(p) -> bool:
    try:
        p.send(Message("Secret", b"x"), queue=Q0, timeout_ms=2000)
    except AuthenticationError:
        return True
    return False


def test_a_reader_limited_to_one_topic_and_group_reads_that_and_nothing_else(secured,
                                                                             tmp_path):
    cluster, keys, admin, *_ = secured
    zk, cl = cluster.zookeeper, cluster.cluster
    cluster.create_topic("Other", 1)
    with Producer(zookeeper=zk, cluster=cl, credentials=admin) as p:
        assert p.send_batch([Message("Secret", b"s%d" % i) for i in range(20)], queue=Q0).ok
        assert p.send(Message("Other", b"o")).ok
    reader = str(tmp_path / "reader.json")
    duomq("auth", "user", "add", "reader", "--allow", "Topic:Secret:Sub", "--allow",
          "Group:billing:Sub", "--out", reader, "--zookeeper", zk, "--cluster", cl)
    before = stored(zk, cl, admin)
    with PullConsumer("billing", zookeeper=zk, cluster=cl, credentials=reader) as c:
        assert len(c.pull(Q0, 0, 100).messages) == 20
        c.commit({Q0: 20})
        assert c.committed(Q0) == 20
        with pytest.raises(AuthorizationError, match="lacks the permission Topic:Other:Sub"):
            c.pull(MessageQueue("Other", "broker-a", 0), 0)
    with PullConsumer("audit", zookeeper=zk, cluster=cl, credentials=reader) as c:
        with pytest.raises(AuthorizationError, match="lacks the permission Group:audit:Sub"):
            c.pull(Q0, 0)
    with Producer(zookeeper=zk, cluster=cl, credentials=reader) as p:
        t0 = time.monotonic()
        with pytest.raises(AuthorizationError, match="lacks the permission Topic:Secret:Pub"):
            p.send(Message("Secret", b"forged"), queue=Q0)
        assert time.monotonic() - t0 < 2           # not retried: it would fail the same way
    assert stored(zk, cl, admin) == before          # the refused send stored nothing
    p = duomq("status", "--zookeeper", zk, "--cluster", cl, "--credentials", reader,
              check=False)
    assert f"lacks the permission Cluster:{cl}:Get" in p.stdout


def test_a_secured_dev_cluster_and_its_cli(zk_server, tmp_path):
    dev = str(tmp_path / "dev")
    env = {"DUOMQ_DEV_DIR": dev}
    up = json.loads(duomq("dev", "up", "--auth", "--slaves", "1", "--zookeeper",
                          zk_server.connect, "--cluster", f"Sec{os.getpid()}", "--json",
                          env=env).stdout)
    try:
        admin = up["credentials"]["admin"]
        assert admin == os.path.join(dev, "auth", "admin.json") and os.path.exists(admin)
        assert [b["role"] for b in up["brokers"]] == ["MASTER", "SLAVE"]
        st = json.loads(duomq("dev", "status", "--json", env=env).stdout)
        assert st["credentials"] == {"admin": admin}
        # on its dev cluster the CLI uses the admin's credentials by itself
        duomq("topic", "create", "Sec", "--queues", "2", env=env)
        assert "SEND_OK 3" in duomq("produce", "Sec", "a", "b", "c", env=env).stdout
        out = duomq("consume", "Sec", "--group", "g", "--from", "first", "--until-idle", "2",
                    "--quiet", "--json", env=env).stdout
        assert json.loads(out.splitlines()[-1])["consumed"] == 3
        # another process, without the dev cluster's directory, is refused
        p = duomq("produce", "Sec", "x", "--zookeeper", st["zookeeper"], "--cluster",
                  st["cluster"], env={"DUOMQ_DEV_DIR": str(tmp_path / "none")}, check=False)
        assert p.returncode == 2 and "credentials are needed" in p.stderr
        # a plain cluster can still live beside it in the same ZooKeeper
        plain = json.loads(duomq("dev", "up", "--zookeeper", zk_server.connect, "--cluster",
                                 f"Plain{os.getpid()}", "--json",
                                 env={"DUOMQ_DEV_DIR": str(tmp_path / "plain")}).stdout)
        duomq("dev", "down", env={"DUOMQ_DEV_DIR": str(tmp_path / "plain")})
        assert [b["role"] for b in plain["brokers"]] == ["MASTER"]
    finally:
        duomq("dev", "down", env=env)


def test_the_pods_probes_dial_a_secured_broker_with_its_own_key(secured, tmp_path):
    cluster, keys, admin, master, slave = secured
    conf = tmp_path / "duomq.toml"
    conf.write_text(f'cluster = "{cluster.cluster}"\nzookeeper = "{cluster.zookeeper}"\n'
                    f'group = "broker-a"\nbroker_id = 1\nport = {slave.port}\n'
                    f'ha_port = {slave.ha_port}\nauth = true\nauth_dir = "{keys}"\n')
    env = {"DUOMQ_CREDENTIALS": ""}           # not the admin's: the broker's own key
    for probe in ("--live", "--ready"):
        out = duomq("health", probe, "--config", str(conf), "--json", env=env).stdout
        assert json.loads(out)["ok"] is True, out
    # a plaintext probe from elsewhere is not answered
    p = duomq("health", "--live", "--address", f"tcp://127.0.0.1:{slave.port}", "--timeout",
              "1", env=env, check=False)
    assert p.returncode == 1 and "no answer" in p.stdout


def test_a_plaintext_broker_cannot_join_a_secured_cluster(secured):
    cluster, *_ = secured
    with pytest.raises(RuntimeError, match="is secured .* this broker has auth = false"):
        cluster.add_broker("broker-b", 0)


def test_zookeeper_nodes_are_written_by_brokers_and_admins_only(secured, tmp_path):
    cluster, keys, admin, *_ = secured
    zk, cl = cluster.zookeeper, cluster.cluster
    paths = ZkPaths(cl)
    anonymous = zkutil.connect(zk, access=None)
    try:
        # that the cluster is secured is public; nothing else is
        assert AuthConfigNode.from_bytes(anonymous.get(paths.auth_config)[0]).enabled is True
        for read in (lambda: anonymous.get(paths.topic("Secret")),
                     lambda: anonymous.get_children(paths.brokers),
                     lambda: anonymous.get(paths.auth_user("admin"))):
            with pytest.raises(NoAuthError):
                read()
        with pytest.raises(NoAuthError):
            anonymous.create(paths.topic("Forged"), b"{}")
        with pytest.raises(NoAuthError):
            anonymous.set(paths.master("broker-a"), b"{}")
        # the root every cluster lives under: readable, and another cluster may make
        # its node there, but nobody else changes its data or its ACL
        from kazoo.security import OPEN_ACL_UNSAFE

        from duomq.coordinator.paths import ROOT
        wait_for(lambda: not any(e.perms & ~(1 | 4) for e in anonymous.get_acls(ROOT)[0]
                                 if e.id.scheme == "world"), 15, "the root closed by a sweep")
        for change in (lambda: anonymous.set(ROOT, b"mine"),
                       lambda: anonymous.set_acls(ROOT, OPEN_ACL_UNSAFE)):
            with pytest.raises(NoAuthError):
                change()
        anonymous.create(f"{ROOT}/another-cluster")
        with pytest.raises(NoAuthError):                  # nor deletes what is under it
            anonymous.delete(f"{ROOT}/another-cluster")
    finally:
        zkutil.close(anonymous)
    reader = str(tmp_path / "reader.json")
    duomq("auth", "user", "add", "reader", "--allow", "Topic:Secret:Sub", "--allow",
          "Group:g:Sub", "--out", reader, "--quota", "groups=7", "--zookeeper", zk,
          "--cluster", cl)
    listed = json.loads(duomq("auth", "user", "list", "--json", "--zookeeper", zk,
                              "--cluster", cl).stdout)["users"]
    assert next(u for u in listed if u["user"] == "reader")["quotas"] == {"groups": 7}
    bad = duomq("auth", "user", "update", "reader", "--quota", "topics=3", "--zookeeper", zk,
                "--cluster", cl, check=False)
    assert bad.returncode == 2 and "expected KIND=N with KIND one of groups" in bad.stderr
    # a user's client reads, and may not change what brokers and admins wrote
    p = duomq("topic", "delete", "Secret", "--zookeeper", zk, "--cluster", cl,
              "--credentials", reader, check=False)
    assert p.returncode == 2 and "ZooKeeper refused" in p.stderr
    p = duomq("topic", "create", "Forged", "--zookeeper", zk, "--cluster", cl,
              "--credentials", reader, check=False)     # nor create topics, of any kind
    assert p.returncode == 2 and "ZooKeeper refused" in p.stderr, p.stdout + p.stderr
    own = zkutil.connect(zk, access=Credentials.load(reader).zookeeper)
    try:
        with pytest.raises(NoAuthError):
            TopicAdmin(own, cl).ensure_system("%RETRY%other", ["broker-a"])
    finally:
        zkutil.close(own)
    assert "Secret" in duomq("topic", "list", "--zookeeper", zk, "--cluster", cl,
                             "--credentials", reader).stdout
    # ... and joins consumer groups (its nodes under groups/); the group's
    # retry and dead-letter topics are made by the master at its first failure
    with Producer(zookeeper=zk, cluster=cl, credentials=admin) as p:
        assert p.send_batch([Message("Secret", b"x%d" % i) for i in range(10)], queue=Q0).ok
    got = []

    def handle(msg):
        if msg.body == b"x3":               # given up at once: to %DLQ%g
            raise RuntimeError("not this one")
        got.append(msg.body)
    c = PushConsumer("g", topic="Secret", on_message=handle, zookeeper=zk, cluster=cl, credentials=reader,
                     consume_from="first", max_reconsume_times=0)
    c.start()
    try:
        wait_for(lambda: len(got) >= 9, 30, "the reader's push consumer to read 9")
        for name in ("%RETRY%g", "%DLQ%g"):
            wait_for(lambda n=name: read_node(zk, paths.topic(n)).get("queues")
                     == {"broker-a": 1}, 15, f"the master to make {name} at the first failure")
    finally:
        c.shutdown()
    with PullConsumer("g", zookeeper=zk, cluster=cl, credentials=reader) as dlq:
        (mq,) = dlq.queues("%DLQ%g")
        wait_for(lambda: [m.body for m in dlq.pull(mq, 0, 10).messages] == [b"x3"], 10,
                 "the given-up message in the group's dead-letter queue")
    # credentials without the ZooKeeper digest are refused with that said
    bare = Credentials.load(reader)
    bare_path = str(tmp_path / "bare.json")
    Credentials(bare.user, bare.keys, bare.broker_public_key).write(bare_path)
    with pytest.raises(AuthenticationError, match="refused by ZooKeeper"):
        PullConsumer("g", zookeeper=zk, cluster=cl, credentials=bare_path)


def test_a_key_the_brokers_zap_refuses_fails_at_once_not_at_a_timeout(secured):
    cluster, keys, admin, master, _ = secured
    stranger = Credentials("x", KeyPair.new(), Credentials.load(admin).broker_public_key)
    remoting = RemotingClient("stranger", credentials=stranger)
    try:
        t0 = time.monotonic()
        with pytest.raises(AuthenticationError, match="refused these credentials"):
            remoting.call(master.address, pb.BROKER_STATUS, pb.BrokerStatusRequest(), 10)
        assert time.monotonic() - t0 < 3          # the handshake's refusal, not the 10 s
        fut = remoting.request(master.address, pb.BROKER_STATUS, pb.BrokerStatusRequest(), 10)
        with pytest.raises(AuthenticationError):
            fut.result(5)
    finally:
        remoting.close()


def test_credentials_in_the_environment_leave_a_plain_clusters_nodes_open(secured, tmp_path):
    """$DUOMQ_CREDENTIALS names a secured cluster's admin; what the CLI and
    the clients create in another, plain cluster of the same ZooKeeper stays
    open, or that cluster's brokers (without credentials) could not change
    it."""
    from duomq.testing.harness import LocalCluster
    secured_cluster, *_ = secured
    zk = secured_cluster.zookeeper
    plain = LocalCluster(zk, "Plain", str(tmp_path / "plain"))
    try:
        plain.add_broker("broker-a", 0)
        duomq("topic", "create", "Open", "--queues", "2", "--zookeeper", zk, "--cluster", "Plain")
        got = []
        c = PushConsumer("g", topic="Open", on_message=got.append, zookeeper=zk, cluster="Plain",
                         consume_from="first")
        c.start()
        try:
            with Producer(zookeeper=zk, cluster="Plain") as p:
                assert p.send_batch([Message("Open", b"x")] * 5,
                                    queue=MessageQueue("Open", "broker-a", 0)).ok
            wait_for(lambda: len(got) >= 5, 30, "the plain cluster's consumer to read 5")
            paths = ZkPaths("Plain")
            anonymous = zkutil.connect(zk, access=None)
            try:
                members = anonymous.get_children(paths.group_members("g"))
                for path in (paths.topic("Open"), f"{paths.group_members('g')}/{members[0]}"):
                    acl, _ = anonymous.get_acls(path)
                    assert [str(a.id.scheme) for a in acl] == ["world"], (path, acl)
            finally:
                zkutil.close(anonymous)
        finally:
            c.shutdown()
    finally:
        plain.stop_all()


def _listening(port: int) -> bool:
    return any(c.laddr.port == port and c.status == psutil.CONN_LISTEN
               for c in psutil.net_connections("tcp"))


def test_a_starting_broker_holds_a_users_handshake_until_it_has_read_the_users(secured,
                                                                             netfilter):
    """A secured broker binds its ports before it reaches ZooKeeper (a port
    taken fails before it changes anything there), so a client reconnecting
    to it can shake hands before it knows any user. That handshake waits for
    the users instead of being refused as an unknown key, which a client
    takes as final (a removed or replaced key). Forced here: ZooKeeper
    takes no new connection while the broker starts, for two seconds after
    its port is open."""
    cluster, keys, admin, master, slave = secured
    slave.stop()
    master.stop()
    for port in zookeeper_ports(cluster.zookeeper):
        netfilter.drop("OUTPUT", "-p", "tcp", "--dport", str(port), "--syn")
    mark = os.path.getsize(master.log_path)
    master.start(wait=False)
    wait_for(lambda: _listening(master.port), timeout_s=20, what="the restarted broker's port")
    remoting = RemotingClient("admin", credentials=Credentials.load(admin))
    try:
        fut = remoting.request(master.address, pb.BROKER_STATUS, pb.BrokerStatusRequest(), 30)
        time.sleep(2.0)
        assert master.alive() and not fut.done(), fut.exception() if fut.done() else None
        assert netfilter.heal()
        status, error, answer = fut.result(20)   # served once the users are read
        assert status == pb.OK and answer.broker_id == 0, error
    finally:
        remoting.close()
    master.wait_registered()
    log = pathlib.Path(master.log_path).read_bytes()[mark:].decode()
    assert "waits until the users are read" in log and "refused a connection" not in log


def test_a_secured_brokers_metrics_need_the_clusters_token(secured, prometheus):
    """With auth, /metrics (whose series name every topic and group) answers
    401 to a scrape without auth_dir/metrics.token or with another, and its
    series to one with it; a real Prometheus given the token scrapes both
    brokers, one without it scrapes none."""
    import urllib.error
    import urllib.request
    cluster, keys, _admin, master, slave = secured
    token = (keys / "metrics.token").read_text().strip()
    assert oct((keys / "metrics.token").stat().st_mode & 0o777) == "0o600"
    url = f"http://127.0.0.1:{master.metrics_port}/metrics"
    for given in (None, "Bearer wrong", f"Basic {token}", f"Bearer {token}x"):
        req = urllib.request.Request(url, headers={"Authorization": given} if given else {})
        with pytest.raises(urllib.error.HTTPError) as got:
            urllib.request.urlopen(req, timeout=5)
        assert got.value.code == 401
        assert b"duomq_" not in got.value.read()
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=5) as r:
        assert r.status == 200 and b"duomq_broker_info" in r.read()
    targets = [f"127.0.0.1:{b.metrics_port}" for b in (master, slave)]
    allowed = prometheus(targets, token_file=str(keys / "metrics.token"))
    refused = prometheus(targets)
    wait_for(lambda: allowed.targets_up() == 2, 30, "the brokers scraped with the token")

    def turned_away():
        active = refused.api("targets")["activeTargets"]
        return len(active) == 2 and all(t["health"] == "down" and "401" in t["lastError"]
                                        for t in active)
    wait_for(turned_away, 30, "the scrapes without the token answered 401")
