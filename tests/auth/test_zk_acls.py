"""The ACL of each ZooKeeper node of a secured cluster (pure): users read the
cluster's nodes, a group's users its containers, nobody but ``duomq`` holds
ADMIN, and a sweep tells the nodes it made from those a user made."""

from kazoo.security import ACL, OPEN_ACL_UNSAFE, Id, Permissions

from duomq.auth.acl import Policy
from duomq.auth.zk_acls import (
    ADMIN,
    ALL,
    CREATE,
    DELETE,
    READ,
    WRITE,
    group_access,
    group_of,
    group_users,
    made_node_acl,
    maker,
    ours,
    same,
    wanted,
    with_principal,
    world_writable,
)
from duomq.coordinator.paths import ZkPaths

P = ZkPaths("C")
ADMINS = ("duomq:AAA",)
USERS = {"alice": ("alice:a", Policy.parse(["Topic:T:Sub", "Group:billing:Sub"])),
         "bob": ("bob:b", Policy.parse(["Group:*:Sub"], ["Group:billing:Sub"])),
         "carl": ("carl:c", Policy.parse(["Topic:T:Pub"])),
         "old": ("", Policy.parse(["Group:*:Sub"]))}       # no ZooKeeper login yet


def perms(acl) -> dict[str, int]:
    return {e.id.id: e.perms for e in acl}


def test_users_read_the_cluster_nodes_and_nothing_more():
    for path in (P.cluster_root, P.brokers, P.member("broker-a", 0), P.topic("T"),
                 P.route("T", "broker-a"), P.master("broker-a")):
        assert perms(wanted(path, P, ADMINS, USERS)) == {
            "duomq:AAA": ALL, "alice:a": READ, "bob:b": READ, "carl:c": READ}, path


def test_a_groups_users_are_those_whose_policy_grants_it():
    assert group_users("billing", USERS) == ["alice:a"]          # bob is denied it
    assert group_users("audit", USERS) == ["bob:b"]
    assert perms(wanted(P.consumer_groups, P, ADMINS, USERS)) == {"duomq:AAA": ALL}
    assert perms(wanted(P.consumer_group("billing"), P, ADMINS, USERS)) == {
        "duomq:AAA": ALL, "alice:a": READ}
    for path in (P.group_members("billing"), P.group_owners("billing"),
                 P.group_reset("billing", "T").rsplit("/", 1)[0]):
        assert perms(wanted(path, P, ADMINS, USERS)) == {
            "duomq:AAA": ALL, "alice:a": READ | CREATE | DELETE}, path


def test_the_auth_nodes_are_the_admins_and_each_user_reads_its_own():
    assert perms(wanted(P.auth_users, P, ADMINS, USERS)) == {"duomq:AAA": ALL}
    assert perms(wanted(P.auth_user("alice"), P, ADMINS, USERS)) == {
        "duomq:AAA": ALL, "alice:a": READ}
    config = wanted(P.auth_config, P, ADMINS, USERS)
    assert ACL(READ, Id("world", "anyone")) in config and not world_writable(config)
    assert wanted("/duomq/Other/topics", P, ADMINS, USERS) is None


def test_no_user_holds_admin_anywhere():
    paths = [P.cluster_root, P.topic("T"), P.consumer_group("billing"),
             P.group_members("billing"), P.auth_user("alice"), P.auth_config]
    for path in paths:
        for e in wanted(path, P, ADMINS, USERS):
            assert e.id.id in ADMINS or not e.perms & ADMIN, (path, e)
    made = made_node_acl(ADMINS, ["alice:a", "zed:z"], "alice:a")
    assert perms(made) == {"duomq:AAA": ALL, "alice:a": READ | WRITE, "zed:z": READ}


def test_an_admins_own_node_stays_the_admins():
    assert perms(made_node_acl(ADMINS, ["alice:a"], "duomq:AAA")) == {
        "duomq:AAA": ALL, "alice:a": READ}


def test_a_sweep_tells_its_nodes_from_a_users_and_from_open_ones():
    mine = wanted(P.topic("T"), P, ADMINS, USERS)
    made = made_node_acl(ADMINS, ["bob:b"], "alice:a")
    retired = [ACL(ALL, Id("digest", "duomq:AAA")), ACL(ALL, Id("digest", "client:old"))]
    assert ours(mine, ADMINS) and not ours(made, ADMINS) and not ours(OPEN_ACL_UNSAFE, ADMINS)
    assert not ours(retired, ADMINS) and ours(retired, ADMINS, ("client:old",))
    assert not ours(mine, ("duomq:other",))            # another cluster secret's
    assert maker(made, ADMINS) == "alice:a" and maker(mine, ADMINS) is None
    assert world_writable(OPEN_ACL_UNSAFE) and not world_writable(mine)
    assert same(list(reversed(mine)), mine) and not same(made, mine)


def test_a_rotation_changes_only_the_principals_entries_on_a_users_node():
    made = made_node_acl(ADMINS, ["bob:b"], "alice:a")
    both = with_principal(made, ("duomq:AAA", "duomq:NEW"), ())          # after ``new``
    assert perms(both) == {"duomq:AAA": ALL, "duomq:NEW": ALL, "alice:a": READ | WRITE,
                           "bob:b": READ}
    assert maker(both, ("duomq:AAA", "duomq:NEW")) == "alice:a"
    assert with_principal(both, ("duomq:AAA", "duomq:NEW"), ()) is None   # already so
    retired = with_principal(both, ("duomq:NEW",), ("duomq:AAA",))       # after ``retire``
    assert perms(retired) == {"duomq:NEW": ALL, "alice:a": READ | WRITE, "bob:b": READ}
    # a reader or maker that happens to be no principal id is never dropped
    assert with_principal(made, ADMINS, ("duomq:GONE",)) is None


def test_a_groups_node_names_its_brokers_and_users():
    access = group_access("billing", ADMINS, USERS)
    assert access.admins == ADMINS and access.readers == ("alice:a",)
    assert group_of(P.consumer_group("billing"), P) == "billing"
    assert group_of(P.group_members("billing"), P) is None
    assert group_of(P.consumer_groups, P) is None
    assert Permissions.ALL == ALL and WRITE not in (READ, CREATE, DELETE)
