"""A secured cluster's ZooKeeper, tried as a registered user would attack it
(issue 40): each user logs in as itself, reaches only the groups its policy
names, changes no ACL anywhere, reads no other user's policy, and a removed
user is refused by ZooKeeper within seconds; a broker never changes the ACL
of a node it did not make. Real ZooKeeper, real brokers."""

import pathlib
import time

import pytest
from kazoo.exceptions import BadVersionError, NoAuthError, NoNodeError
from kazoo.security import ACL, OPEN_ACL_UNSAFE, Id, Permissions

from duomq.auth.credentials import Credentials
from duomq.auth.zk_keeper import ROTATION_SETTLE_S
from duomq.client import Message, Producer, PullConsumer, PushConsumer
from duomq.client.cluster import offset_reset
from duomq.client.cluster.made_nodes import acl_in_group
from duomq.common.message import MessageQueue
from duomq.common.role import Role
from duomq.coordinator import zk as zkutil
from duomq.coordinator.paths import ZkPaths
from duomq.coordinator.zk_login import admin_ids, zk_access_for_admin
from duomq.proto import pb
from duomq.testing.harness import run_cli, wait_for

pytestmark = pytest.mark.integration
Q0 = MessageQueue("Secret", "broker-a", 0)


def fail_one(zk, cl, topic: str, group: str, credentials=None) -> None:
    """A consumer of ``group`` gives a message of ``topic`` up (a send back
    to its dead-letter queue): what makes a master create the group's retry
    and dead-letter topics."""
    given = {"credentials": credentials} if credentials else {}
    with Producer(zookeeper=zk, cluster=cl, **given) as p:
        assert p.send(Message(topic, b"given up")).ok
    with PullConsumer(group, zookeeper=zk, cluster=cl, read_from="master", **given) as c:
        m = next(m for q in c.queues(topic) for m in c.pull(q, 0, 1).messages)
        req = pb.SendBackRequest(consumer_group=group, physical_offset=m.physical_offset,
                                 dead_letter=True)
        status, error, _ = c.remoting.call(c.master_address("broker-a", topic), pb.SEND_BACK,
                                           req, 10)
        assert status == pb.OK, error


def add_user(cluster, tmp_path, name: str, *allow: str) -> str:
    path = str(tmp_path / f"{name}.json")
    args = [a for p in allow for a in ("--allow", p)]
    run_cli("auth", "user", "add", name, *args, "--out", path, "--zookeeper", cluster.zookeeper,
            "--cluster", cluster.cluster)
    return path


def session_of(cluster, creds: str):
    """A raw ZooKeeper session with the user's own login (what an attacker
    holding the credentials file can do with kazoo directly)."""
    return zkutil.connect(cluster.zookeeper, access=Credentials.load(creds).zookeeper,
                          cluster=cluster.cluster)


def tree(zk, root: str) -> list[str]:
    out, todo = [], [root]
    while todo:
        path = todo.pop()
        out.append(path)
        try:
            todo.extend(f"{path}/{c}" for c in zk.get_children(path))
        except (NoNodeError, NoAuthError):
            pass
    return out


def _attempt(zk, what: str, path: str, stat) -> None:
    if what == "set":
        zk.set(path, b"forged")
    elif what == "create":
        zk.create(f"{path}/forged", b"")
    elif stat.numChildren:
        zk.delete(path + "/none")       # the right to delete its children
    else:
        zk.delete(path, version=stat.version)


def every_node(cluster) -> list[str]:
    """Every node of the cluster, listed as the admin."""
    admin = zkutil.connect(cluster.zookeeper)
    try:
        return tree(admin, ZkPaths(cluster.cluster).cluster_root)
    finally:
        zkutil.close(admin)


def consuming(cluster, creds: str, group: str, got: list) -> PushConsumer:
    c = PushConsumer(group, topic="Secret", on_message=got.append, zookeeper=cluster.zookeeper,
                     cluster=cluster.cluster, consume_from="first", credentials=creds)
    return c.start()


def test_a_user_changes_nothing_outside_its_own_groups_and_no_acl_anywhere(secured, tmp_path):
    cluster, _keys, admin, *_ = secured
    paths = ZkPaths(cluster.cluster)
    with Producer(zookeeper=cluster.zookeeper, cluster=cluster.cluster, credentials=admin) as p:
        assert p.send_batch([Message("Secret", b"m%d" % i) for i in range(20)], queue=Q0).ok
    reader = add_user(cluster, tmp_path, "reader", "Topic:Secret:Sub", "Group:billing:Sub")
    auditor = add_user(cluster, tmp_path, "auditor", "Topic:Secret:Sub", "Group:audit:Sub")
    mine, theirs = [], []
    c1, c2 = consuming(cluster, reader, "billing", mine), consuming(cluster, auditor, "audit",
                                                                     theirs)
    try:
        wait_for(lambda: len(mine) >= 20 and len(theirs) >= 20, 30, "both groups to read 20")
        zk = session_of(cluster, reader)
        try:
            # another group's offset reset, queue owner, membership: refused
            with pytest.raises(NoAuthError):
                offset_reset.publish(zk, cluster.cluster, "audit", "Secret", {Q0: 0}, 0)
            with pytest.raises(NoAuthError):
                zk.create(f"{paths.group_owners('audit')}/Secret@broker-a@1", b"x",
                          ephemeral=True, acl=[ACL(Permissions.READ, Id("world", "anyone"))])
            with pytest.raises(NoAuthError):
                zk.create(f"{paths.consumer_groups}/newgroup", b"")
            with pytest.raises(NoAuthError):
                zk.get_children(paths.auth_users)           # no user lists the users
            with pytest.raises(NoAuthError):
                zk.get(paths.auth_user("auditor"))          # nor reads another's policy
            zk.get(paths.auth_user("reader"))               # its own, yes
            # every node of the cluster (listed as the admin: names are no
            # secret): no ACL changes, no writes, no deletes, no creates,
            # except in its own group's containers
            own = f"{paths.consumer_groups}/billing/"
            nodes = every_node(cluster)
            assert len(nodes) > 20 and any(n.startswith(f"{paths.consumer_groups}/audit/")
                                           for n in nodes)
            allowed = []
            for path in nodes:
                stat = zk.exists(path)
                if stat is None:
                    continue                     # gone since (a queue owner let go)
                try:
                    zk.set_acls(path, OPEN_ACL_UNSAFE)
                    pytest.fail(f"the user changed the ACL of {path}")
                except NoAuthError:
                    pass
                except NoNodeError:
                    continue
                for attempt in ("set", "create", "delete"):
                    try:
                        _attempt(zk, attempt, path, stat)
                        allowed.append(path)
                    except BadVersionError:      # past the ACL: it would have been done
                        allowed.append(path)
                    except (NoAuthError, NoNodeError):
                        pass
                    except Exception as exc:     # e.g. NotEmpty: refused for another reason
                        assert "NotEmpty" in type(exc).__name__, (path, exc)
            assert allowed and all(p.startswith(own) for p in allowed), allowed
        finally:
            zkutil.close(zk)
        # the other group's live consumer never moved back
        time.sleep(1)
        assert len(theirs) == 20
    finally:
        c1.shutdown()
        c2.shutdown()


def test_a_removed_user_is_refused_by_zookeeper_and_its_nodes_go(secured, tmp_path):
    cluster, _keys, admin, *_ = secured
    paths = ZkPaths(cluster.cluster)
    reader = add_user(cluster, tmp_path, "leaver", "Topic:Secret:Sub", "Group:g1:Sub")
    got: list = []
    c = consuming(cluster, reader, "g1", got)
    zk = session_of(cluster, reader)
    try:
        wait_for(lambda: zk.get_children(paths.group_members("g1")), 10, "its member node")
        zk.get_children(paths.brokers)
        zk.get(paths.topic("Secret"))
        t0 = time.monotonic()
        out = run_cli("auth", "user", "remove", "leaver", "--zookeeper", cluster.zookeeper,
                      "--cluster", cluster.cluster).stdout
        assert "nodes of removed users deleted" in out, out

        def refused() -> bool:
            try:
                zk.get(paths.topic("Secret"))
                return False
            except NoAuthError:
                return True
        wait_for(refused, 5, "the removed user's reads refused")
        admin_zk = zkutil.connect(cluster.zookeeper)
        try:
            wait_for(lambda: not admin_zk.get_children(paths.group_members("g1")), 5,
                     "its member node deleted")
        finally:
            zkutil.close(admin_zk)
        assert time.monotonic() - t0 < 5
        for attempt in (lambda: zk.get_children(paths.brokers),
                        lambda: zk.get_children(paths.routes),
                        lambda: zk.create(f"{paths.group_members('g1')}/back", b"",
                                          ephemeral=True)):
            with pytest.raises(NoAuthError):
                attempt()
    finally:
        zkutil.close(zk)
        t1 = time.monotonic()
        c.shutdown()
        shut_s = time.monotonic() - t1
    # its commits refused (AUTHENTICATION_FAILED), the consumer lets its
    # queues go at once instead of trying again until its hand-off's deadline
    assert shut_s < 5, shut_s


def test_a_policy_change_reaches_zookeeper_at_once(secured, tmp_path):
    cluster, *_ = secured
    paths = ZkPaths(cluster.cluster)
    user = add_user(cluster, tmp_path, "mover", "Topic:Secret:Sub", "Group:one:Sub")
    got: list = []
    consuming(cluster, add_user(cluster, tmp_path, "owner2", "Topic:Secret:Sub",
                                "Group:two:Sub"), "two", got).shutdown()
    zk = session_of(cluster, user)
    try:
        with pytest.raises(NoAuthError):
            zk.create(f"{paths.group_members('two')}/x", b"", ephemeral=True)
        run_cli("auth", "user", "update", "mover", "--allow", "Topic:Secret:Sub", "--allow",
                "Group:two:Sub", "--zookeeper", cluster.zookeeper, "--cluster", cluster.cluster)
        zk.create(f"{paths.group_members('two')}/x", b"", ephemeral=True)
    finally:
        zkutil.close(zk)


def test_a_broker_never_changes_an_acl_it_did_not_make(secured, tmp_path):
    """Nodes open to anyone (made before the cluster was secured) stay as
    they are through a broker's start, with a warning; ``duomq auth lock``
    locks the persistent ones when the admin says so."""
    cluster, _keys, admin, master, slave = secured
    paths = ZkPaths(cluster.cluster)
    anonymous = zkutil.connect(cluster.zookeeper, access=None)
    legacy = paths.group_members("legacy")
    try:
        # as a plain cluster's clients left them (made here by the admin: the
        # secured cluster lets nobody else create under groups/)
        maker = zkutil.connect(cluster.zookeeper)
        try:
            maker.create(legacy, b"", makepath=True, acl=OPEN_ACL_UNSAFE)
            maker.set_acls(paths.consumer_group("legacy"), OPEN_ACL_UNSAFE)
        finally:
            zkutil.close(maker)
        anonymous.create(f"{legacy}/old-client", b"", ephemeral=True, acl=OPEN_ACL_UNSAFE)
        slave.restart()
        assert anonymous.get_acls(legacy)[0] == OPEN_ACL_UNSAFE
        assert anonymous.get_acls(f"{legacy}/old-client")[0] == OPEN_ACL_UNSAFE
        wait_for(lambda: "may be changed by anyone" in slave.log_tail(200), 10,
                 "the broker's warning")
        out = run_cli("auth", "lock", "--zookeeper", cluster.zookeeper, "--cluster",
                      cluster.cluster).stdout
        assert "open nodes locked" in out and "open ephemeral nodes are left" in out, out
        with pytest.raises(NoAuthError):
            anonymous.create(f"{legacy}/new", b"")
        assert anonymous.get_acls(f"{legacy}/old-client")[0] == OPEN_ACL_UNSAFE
    finally:
        zkutil.close(anonymous)


def test_the_zookeeper_secret_rotates_without_downtime(secured, tmp_path):
    """new: both secrets on every node; promote, then the brokers restarted
    one at a time: they log in with the new one while users go on; retire:
    the old secret is refused everywhere."""
    cluster, keys, admin, master, slave = secured
    paths = ZkPaths(cluster.cluster)
    zk, cl = cluster.zookeeper, cluster.cluster
    user = add_user(cluster, tmp_path, "steady", "Topic:Secret:Pub", "Topic:Secret:Sub",
                    "Group:steady:Sub")
    old = (keys / "zookeeper.secret").read_text().strip()

    def ids_on(path: str) -> set[str]:
        c = zkutil.connect(zk)
        try:
            return {e.id.id.split(":")[0] + ":" + e.id.id.split(":")[1][:6]
                    for e in c.get_acls(path)[0] if e.id.id.startswith("duomq:")}
        finally:
            zkutil.close(c)

    def held_by_both() -> bool:
        c = zkutil.connect(zk)
        try:
            members = [zkutil.read_member(c, paths, "broker-a", i) for i in (0, 1)]
        finally:
            zkutil.close(c)
        return all(m is not None for m in members) and \
            len({m.max_offset for m in members}) == 1 and \
            all(m.lag_bytes == 0 for m in members if m.role == Role.SLAVE)

    def sends() -> bool:
        with Producer(zookeeper=zk, cluster=cl, credentials=user) as p:
            return p.send(Message("Secret", b"r"), queue=Q0).ok

    run_cli("auth", "rotate", "new", "--auth-dir", str(keys), "--zookeeper", zk, "--cluster", cl)
    new = (keys / "zookeeper.secret.next").read_text().strip()
    assert len(ids_on(paths.topic("Secret"))) == 2 and len(ids_on(paths.brokers)) == 2
    assert sends()
    run_cli("auth", "rotate", "promote", "--auth-dir", str(keys), "--zookeeper", zk,
            "--cluster", cl)
    assert (keys / "zookeeper.secret").read_text().strip() == new
    assert Credentials.load(admin).zookeeper["digest"] == f"duomq:{new}"
    for broker in (slave, master):
        broker.restart()
        assert sends()
        # a rolling restart goes on once the slave holds what was sent: the
        # master stopped while the slave just back lacked the last send
        # (ASYNC replication) would lose it to the slave's takeover
        wait_for(held_by_both, 30, "the slave to hold all the master wrote")
    run_cli("auth", "rotate", "retire", "--auth-dir", str(keys), "--zookeeper", zk,
            "--cluster", cl)
    assert not (keys / "zookeeper.secret.previous").exists()
    stale = zkutil.connect(zk, access={"digest": f"duomq:{old}"})
    try:
        with pytest.raises(NoAuthError):
            stale.get(paths.topic("Secret"))
        with pytest.raises(NoAuthError):
            stale.get_children(paths.auth_users)
    finally:
        zkutil.close(stale)
    nodes = every_node(cluster)
    assert len(nodes) > 20 and all(len(ids_on(n)) <= 1 for n in nodes if n.startswith(
        paths.cluster_root)), [n for n in nodes if len(ids_on(n)) > 1]
    assert sends()
    got: list = []
    c = consuming(cluster, user, "steady", got)
    try:
        wait_for(lambda: len(got) >= 4, 30, "the user's consumer to read what it sent")
    finally:
        c.shutdown()


def test_a_deleted_groups_nodes_are_made_again_when_a_member_comes_back(secured, tmp_path):
    cluster, *_ = secured
    paths = ZkPaths(cluster.cluster)
    user = add_user(cluster, tmp_path, "back", "Topic:Secret:Sub", "Group:g3:Sub")
    got: list = []
    consuming(cluster, user, "g3", got).shutdown()
    run_cli("group", "delete", "g3", "--zookeeper", cluster.zookeeper, "--cluster",
            cluster.cluster)
    admin = zkutil.connect(cluster.zookeeper)
    try:
        assert not admin.exists(paths.consumer_group("g3"))
        c = consuming(cluster, user, "g3", got)      # joins: a broker makes the nodes again
        try:
            assert admin.exists(paths.group_members("g3"))
            assert admin.get_children(paths.group_members("g3")) == [c.client_id]
        finally:
            c.shutdown()
    finally:
        zkutil.close(admin)


def test_a_sweep_that_read_the_users_before_one_was_added_keeps_its_nodes(secured, tmp_path,
                                                                          monkeypatch):
    """The interleaving of two sweeps: one read the users, then the admin
    added a user and that user's client made its member node, then the
    first sweep finds a node whose maker it does not know. It reads the
    users again before deleting: the new user's node stays; a node of a
    user that is really gone is deleted."""
    from duomq.auth import zk_keeper
    from duomq.auth.zk_keeper import AclSweeper
    from duomq.coordinator.zk_login import admin_ids
    cluster, _keys, admin, *_ = secured
    paths = ZkPaths(cluster.cluster)
    conn = zkutil.connect(cluster.zookeeper)
    stale = zk_keeper.read_users(conn, paths)               # before "late" is added
    user = add_user(cluster, tmp_path, "late", "Topic:Secret:Sub", "Group:g4:Sub")
    got: list = []
    c = consuming(cluster, user, "g4", got)
    try:
        (member,) = conn.get_children(paths.group_members("g4"))
        reads = []
        real = zk_keeper.read_users

        def first_stale(zk, p):
            reads.append(1)
            return stale if len(reads) == 1 else real(zk, p)
        monkeypatch.setattr(zk_keeper, "read_users", first_stale)
        done = AclSweeper(conn, cluster.cluster,
                          admin_ids(Credentials.load(admin).zookeeper)).sweep()
        assert len(reads) == 2, "the sweep read the users again before deleting"
        assert not done.deleted and conn.exists(f"{paths.group_members('g4')}/{member}")
        monkeypatch.setattr(zk_keeper, "read_users", real)
        run_cli("auth", "user", "remove", "late", "--zookeeper", cluster.zookeeper,
                "--cluster", cluster.cluster)
        assert not conn.exists(f"{paths.group_members('g4')}/{member}")
    finally:
        zkutil.close(conn)
        c.shutdown()


def test_a_member_whose_user_is_removed_leaves_no_message_unconsumed(secured, tmp_path,
                                                                     caplog):
    """The adversary's schedule for refused commits: a member's user is
    removed while it holds queues and has consumed past its last commit,
    producers going on; its commits are refused and it lets its queues go
    at once, the other member takes them over from the group's commits,
    and across the whole history (every message of every queue) each was
    consumed by someone, at least once."""
    cluster, _keys, admin, *_ = secured
    stayer = add_user(cluster, tmp_path, "stayer", "Topic:Secret:Sub", "Group:pair:Sub")
    leaver = add_user(cluster, tmp_path, "leaver", "Topic:Secret:Sub", "Group:pair:Sub")
    kept, left = [], []
    a = consuming(cluster, stayer, "pair", kept)
    b = consuming(cluster, leaver, "pair", left)
    sent = []
    with Producer(zookeeper=cluster.zookeeper, cluster=cluster.cluster, credentials=admin) as p:
        def produce(first: int, n: int) -> None:
            for i in range(first, first + n, 10):
                bodies = [b"n%d" % j for j in range(i, i + 10)]
                assert p.send_batch([Message("Secret", x) for x in bodies]).ok
                sent.extend(bodies)
                time.sleep(0.01)
        try:
            wait_for(lambda: a.held() and b.held(), 20, "both members holding queues")
            produce(0, 200)
            wait_for(lambda: left, 10, "the leaver consuming")
            run_cli("auth", "user", "remove", "leaver", "--zookeeper", cluster.zookeeper,
                    "--cluster", cluster.cluster)
            produce(200, 200)                 # while its queues change hands
            seen = lambda: {m.body for m in kept} | {m.body for m in left}  # noqa: E731
            wait_for(lambda: set(sent) <= seen(), 30,
                     "every message consumed by one member or the other")
            wait_for(lambda: len({q.queue_id for q in a.held() if q.topic == "Secret"}) == 2,
                     10, "the stayer holding both queues")
        finally:
            t0 = time.monotonic()
            b.shutdown()
            shut_s = time.monotonic() - t0
            a.shutdown()
    assert len(sent) == 400 and set(sent) <= seen()
    assert left and shut_s < 5, shut_s
    assert "offset commit of pair refused" in caplog.text      # the path this test is for


def test_a_group_first_seen_during_a_rotation_gets_nodes_the_new_secret_reads(secured):
    """A consumer group first heard of after promote, by a master not yet
    restarted: its retry and dead-letter topics must be readable with the new
    secret (the admin's, and the brokers' once restarted). They were not: the
    master made them with its session's default ACL, the old secret's id
    alone, and a broker restarted with the new secret then exited."""
    cluster, keys, _admin, master, slave = secured
    paths = ZkPaths(cluster.cluster)
    zk, cl = cluster.zookeeper, cluster.cluster
    run_cli("auth", "rotate", "new", "--auth-dir", str(keys), "--zookeeper", zk, "--cluster", cl)
    run_cli("auth", "rotate", "promote", "--auth-dir", str(keys), "--zookeeper", zk,
            "--cluster", cl)
    slave.restart()
    # a consumer makes no topic itself: the master makes them at the group's first failure
    fail_one(zk, cl, "Secret", "latecomer")
    admin = zkutil.connect(zk)
    try:
        for name in ("%RETRY%latecomer", "%DLQ%latecomer"):
            wait_for(lambda n=name: admin.exists(paths.topic(n)) is not None, 30,
                     f"the master to make {name}")
            admin.get(paths.topic(name))
    finally:
        zkutil.close(admin)
    master.restart()            # with the new secret: it reads every topic node
    assert master.alive() and slave.alive()


def test_a_rotation_leaves_every_node_to_the_new_secret_and_none_to_the_old(secured, tmp_path):
    """The nodes made while a rotation is under way, at every step: a
    hand-off (an epoch node, the master's node), a new topic (its route
    nodes), a new consumer group (its retry and dead-letter topics), made
    by a broker still on the old secret after ``new`` and after ``promote``,
    by one on the new secret before and after ``retire``; and a consumer
    group's members (their membership and queue owner nodes), one from
    before the rotation and one more joining at every step. Afterwards
    every node of the cluster is read with the new secret (data and
    children), none carries the old secret's id and the old secret reads
    none but the open ones, and both brokers start again."""
    cluster, keys, _admin, b0, b1 = secured
    paths = ZkPaths(cluster.cluster)
    zk, cl = cluster.zookeeper, cluster.cluster
    user = add_user(cluster, tmp_path, "steady", "Topic:*:Pub", "Topic:*:Sub", "Group:*:Sub")
    old = (keys / "zookeeper.secret").read_text().strip()
    old_id = admin_ids(zk_access_for_admin(old))[0]
    ep = ("--zookeeper", zk, "--cluster", cl)
    made: list[str] = []
    got: list = []
    members: list[PushConsumer] = []

    def look(read):
        c = zkutil.connect(zk)
        try:
            return read(c)
        finally:
            zkutil.close(c)

    def joined() -> bool:
        return look(lambda c: len(c.get_children(paths.group_members("steady"))) == len(members)
                    and {"Secret@broker-a@0", "Secret@broker-a@1"} <= set(
                        c.get_children(paths.group_owners("steady"))))

    def in_sync() -> bool:
        ms = look(lambda c: [zkutil.read_member(c, paths, "broker-a", i) for i in (0, 1)])
        return all(m is not None for m in ms) and len({m.max_offset for m in ms}) == 1 and \
            all(m.lag_bytes == 0 for m in ms if m.role == Role.SLAVE)

    def the_slave():
        wait_for(in_sync, 30, "the slave to hold all the master wrote")
        (slave,) = [b for b in (b0, b1) if look(
            lambda c, b=b: zkutil.read_member(c, paths, "broker-a", b.broker_id).role) == Role.SLAVE]
        return slave

    def step(label: str) -> None:
        """What a cluster does meanwhile: a topic, a group (its first
        failure), a hand-off, a member."""
        topic, group = f"Made{label}", f"group-{label.lower()}"
        run_cli("topic", "create", topic, "--queues", "1", *ep)
        wait_for(lambda: look(lambda c: c.exists(paths.route(topic, "broker-a"))), 30,
                 f"the brokers to route {topic}")
        fail_one(zk, cl, topic, group, credentials=user)
        for name in (f"%RETRY%{group}", f"%DLQ%{group}"):
            wait_for(lambda n=name: look(lambda c: c.exists(paths.topic(n))), 30,
                     f"the master to make {name}")
        made.append(topic)
        run_cli("failover", "broker-a", *ep)
        members.append(consuming(cluster, user, "steady", got))
        wait_for(joined, 30, "the new member to join and the queues to be owned")

    members.append(consuming(cluster, user, "steady", got))
    try:
        wait_for(joined, 30, "the first member to own the queues")
        run_cli("auth", "rotate", "new", "--auth-dir", str(keys), *ep)
        step("AfterNew")                 # made by brokers on the old secret
        run_cli("auth", "rotate", "promote", "--auth-dir", str(keys), *ep)
        step("AfterPromote")             # still the old secret's brokers
        the_slave().restart()
        step("HalfRestarted")            # the hand-off goes to the one on the new secret
        the_slave().restart()
        step("Restarted")
        run_cli("auth", "rotate", "retire", "--auth-dir", str(keys), *ep)
        step("Retired")                  # brokers started while both secrets were listed
        unreadable, old_on, stale_read, nodes = every_node_with(zk, paths, old, old_id)
        assert not unreadable, f"unreadable with the new secret: {unreadable}"
        assert not old_on, f"the retired secret's id is still on {old_on}"
        assert not stale_read, f"the retired secret reads {stale_read}"
        kinds = {n.rsplit("/", 2)[-2] for n in nodes}
        assert {"epochs", "members", "owners", "routes"} <= kinds, kinds
        assert len(look(lambda c: c.get_children(paths.epochs("broker-a")))) >= 6
    finally:
        for m in members:
            m.shutdown()
    for b in (b0, b1):
        b.restart()
    wait_for(in_sync, 30, "both brokers back, in sync")
    with Producer(zookeeper=zk, cluster=cl, credentials=user) as p:
        assert all(p.send(Message(t, b"after"), queue=MessageQueue(t, "broker-a", 0)).ok
                   for t in made)


def every_node_with(zk: str, paths: ZkPaths, old: str, old_id: str):
    """Every node of the cluster walked with the new secret (the admin's):
    (those it cannot read, those carrying ``old_id``, those the old secret
    reads though not open to anyone, every node)."""
    admin = zkutil.connect(zk)
    stale = zkutil.connect(zk, access={"digest": f"duomq:{old}"})
    nodes, todo, unreadable, old_on, stale_read = [], [paths.cluster_root], [], [], []
    try:
        while todo:
            path = todo.pop()
            try:
                admin.get(path)
                todo.extend(f"{path}/{c}" for c in admin.get_children(path))
                acl = admin.get_acls(path)[0]
            except NoAuthError:
                unreadable.append(path)
                continue
            except NoNodeError:          # an ephemeral node gone meanwhile
                continue
            nodes.append(path)
            if any(e.id.id == old_id for e in acl):
                old_on.append(path)
            if any(e.id.scheme == "world" and e.perms & Permissions.READ for e in acl):
                continue                 # anyone reads it (auth/config: "credentials needed")
            try:
                stale.get(path)
                stale_read.append(path)
            except (NoAuthError, NoNodeError):
                pass
    finally:
        zkutil.close(stale)
        zkutil.close(admin)
    return unreadable, old_on, stale_read, nodes


def test_a_node_made_with_the_ids_read_just_before_new_gets_the_next_one(secured, tmp_path):
    """The interleaving a rotation's sweeps could miss: a member reads its
    group's ids (the old secret's alone), ``rotate new`` and every broker's
    sweep run, then the member makes its node with what it read. The
    brokers sweep again ROTATION_SETTLE_S after a step, and the node gets
    the next secret's id; before, it stayed unreadable with it until the
    next change of the users."""
    cluster, keys, _admin, master, slave = secured
    paths = ZkPaths(cluster.cluster)
    zk, cl = cluster.zookeeper, cluster.cluster
    user = add_user(cluster, tmp_path, "late", "Topic:Secret:Sub", "Group:late:Sub")
    got: list = []
    consuming(cluster, user, "late", got).shutdown()        # the group's nodes exist
    member = session_of(cluster, user)
    try:
        stale = acl_in_group(member, paths.consumer_group("late"))      # read before `new`
        run_cli("auth", "rotate", "new", "--auth-dir", str(keys), "--zookeeper", zk,
                "--cluster", cl)
        new = (keys / "zookeeper.secret.next").read_text().strip()
        wait_for(lambda: all("principal changed" in pathlib.Path(b.log_path).read_text()
                             for b in (master, slave)), 20, "both brokers to sweep")
        time.sleep(1.0)                  # their first sweeps done (~50 nodes: milliseconds)
        path = paths.group_member("late", "late-member")
        member.create(path, b"", acl=stale, ephemeral=True)
        nxt = zkutil.connect(zk, access={"digest": f"duomq:{new}"})
        try:
            with pytest.raises(NoAuthError):
                nxt.get(path)            # as made: the old secret's id alone
            wait_for(lambda: readable(nxt, path), 20, "the next secret to read the late node")
        finally:
            zkutil.close(nxt)
    finally:
        zkutil.close(member)


def readable(zk, path: str) -> bool:
    try:
        zk.get(path)
        return True
    except NoAuthError:
        return False


def test_a_broker_whose_session_expired_across_a_step_still_follows_it(secured):
    """A rotation step taken while a broker's ZooKeeper session is gone
    (SIGSTOPped past its session timeout): its watch learns of it only on
    the new session, with no event, and must still sweep. The nodes it
    makes afterwards (as master after a hand-off, past every other
    broker's sweeps) are readable with the next secret."""
    cluster, keys, _admin, master, slave = secured
    paths = ZkPaths(cluster.cluster)
    zk, cl = cluster.zookeeper, cluster.cluster
    slave.settings["zk_session_timeout_ms"] = 4000
    slave.restart()

    def member(b):
        c = zkutil.connect(zk)
        try:
            return zkutil.read_member(c, paths, "broker-a", b.broker_id)
        finally:
            zkutil.close(c)

    slave.suspend()
    try:
        wait_for(lambda: member(slave) is None, 30, "the stopped slave's session to expire")
        run_cli("auth", "rotate", "new", "--auth-dir", str(keys), "--zookeeper", zk,
                "--cluster", cl)
        stepped = time.monotonic()
    finally:
        slave.resume()
    new = (keys / "zookeeper.secret.next").read_text().strip()
    wait_for(lambda: (m := member(slave)) is not None and m.role == Role.SLAVE, 30,
             "the slave back on a new session")
    # past the master's second sweep (ROTATION_SETTLE_S after the step)
    time.sleep(max(0.0, stepped + ROTATION_SETTLE_S + 2 - time.monotonic()))
    run_cli("failover", "broker-a", "--to", str(slave.broker_id), "--zookeeper", zk,
            "--cluster", cl)
    nxt = zkutil.connect(zk, access={"digest": f"duomq:{new}"})
    try:
        epochs = paths.epochs("broker-a")
        newest = max(nxt.get_children(epochs))
        nxt.get(f"{epochs}/{newest}")          # made by the slave, now master
        nxt.get(paths.master("broker-a"))
    finally:
        zkutil.close(nxt)
