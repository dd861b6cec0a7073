"""BrokerMembers and QueueOwners against a real ZooKeeper."""

from duomq.client.cluster.members import BrokerMembers
from duomq.client.cluster.queue_owners import QueueOwners
from duomq.common.message import MessageQueue
from duomq.common.role import Role
from duomq.coordinator import zk as zkutil
from duomq.coordinator.nodes import MemberNode
from duomq.coordinator.paths import ZkPaths
from duomq.testing.harness import wait_for


def test_members_follow_every_change_of_their_nodes(zk):
    paths = ZkPaths("c1")
    zk.create(paths.member("g", 0), MemberNode(0, address="tcp://a:1", role=Role.MASTER).to_bytes(),
              makepath=True)
    members = BrokerMembers(zk, "c1")
    try:
        wait_for(lambda: members.of("g"))
        assert members.of("g")[0].role == "MASTER"
        assert members.of("g") is members.of("g")      # unchanged: parsed once
        zk.set(paths.member("g", 0), MemberNode(0, address="tcp://a:1", role=Role.SLAVE).to_bytes())
        wait_for(lambda: members.of("g")[0].role == "SLAVE")
        zk.create(paths.member("g", 1), MemberNode(1, address="tcp://b:1", role=Role.MASTER).to_bytes())
        wait_for(lambda: 1 in members.of("g"))
        zk.delete(paths.member("g", 0))
        wait_for(lambda: 0 not in members.of("g"))
        assert set(members.of("g")) == {1}
    finally:
        members.close()


def test_release_deletes_only_this_sessions_nodes(zk, zk_hosts):
    other = zkutil.connect(zk_hosts)
    try:
        mine = QueueOwners(zk, "c1", "grp", "me", lambda: None)
        theirs = QueueOwners(other, "c1", "grp", "them", lambda: None)
        mqs = [MessageQueue("T", "broker-a", q) for q in range(200)]
        taken, held = mine.acquire(mqs[:150])
        assert taken == set(mqs[:150]) and held == {}
        taken, held = theirs.acquire(mqs[100:])
        assert taken == set(mqs[150:]) and set(held) == set(mqs[100:150])
        assert set(held.values()) == {"me"}
        # ours, theirs and a queue nobody holds: only ours go
        assert mine.release(mqs[50:] + [MessageQueue("T", "broker-a", 999)]) == []
        assert mine.owners() == {**{f"T@broker-a@{q}": "me" for q in range(50)},
                                 **{f"T@broker-a@{q}": "them" for q in range(150, 200)}}
        assert mine.release(mqs[:50]) == []
        assert set(mine.owners().values()) == {"them"}
    finally:
        zkutil.close(other)
