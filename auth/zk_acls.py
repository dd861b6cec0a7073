"""Who may do what to each ZooKeeper node of a secured cluster (pure).

Every user logs in to ZooKeeper as itself (a digest ``name:password`` of its
own, written into its credentials by ``duomq auth user add``; its node keeps
only the digest id). Brokers and admins are the principal ``duomq`` (the
cluster secret's). So an ACL names each user, and removing a user takes its
id out of every ACL at once: no shared client identity outlives a user.

  node (under /duomq/<cluster>)          duomq   users
  the cluster root, brokers/**,          ALL     READ, every user
    topics/**, routes/**
  groups                                 ALL     -
  groups/G                               ALL     READ, users with Group:G:Sub
  groups/G/members|owners|resets         ALL     READ CREATE DELETE, the same users
  a node a user's client makes there     ALL     its maker READ WRITE; READ for the
    (membership, queue owner, reset)              group's users when it was made
  auth, auth/users                       ALL     -
  auth/config                            ALL     READ, anyone (whether auth is on)
  auth/users/U                           ALL     READ, user U

No user holds ADMIN anywhere, so none can change an ACL. A node a user's
client makes gives ``duomq`` every right (a sweep sees its maker's id, and
cleans it up once its maker is no user); a broker never changes its ACL.
A broker changes only the ACLs of nodes the ``duomq`` principal made
(``ours``), to what ``wanted`` says. The group's node holds,
as data, the digest ids a client needs for that (``GroupAccessNode``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kazoo.security import ACL, Id, Permissions

from duomq.auth.acl import Permission, Policy
from duomq.coordinator.group_nodes import GroupAccessNode
from duomq.coordinator.paths import ZkPaths

READ, WRITE, CREATE, DELETE, ADMIN, ALL = (Permissions.READ, Permissions.WRITE,
                                           Permissions.CREATE, Permissions.DELETE,
                                           Permissions.ADMIN, Permissions.ALL)
CONTAINERS = ("members", "owners", "resets")     # where users' clients make nodes
WORLD = Id("world", "anyone")


def digest(id_: str) -> Id:
    return Id("digest", id_)


def group_users(group: str, users: Mapping[str, tuple[str, Policy]]) -> list[str]:
    """The digest ids of the users whose policy grants ``Group:group:Sub``.
    ``users``: name -> (digest id, policy); a user without an id is left out."""
    need = [Permission("Group", group, "Sub")]
    return sorted(zid for zid, policy in users.values() if zid and policy.lacking(need) is None)


def _acl(admins: Iterable[str], others: Iterable[tuple[str, int]]) -> list[ACL]:
    out = [ACL(ALL, digest(a)) for a in admins]
    out += [ACL(perms, digest(i)) for i, perms in others]
    return out


def wanted(path: str, paths: ZkPaths, admins: tuple[str, ...],
           users: Mapping[str, tuple[str, Policy]]) -> list[ACL] | None:
    """The ACL a node the ``duomq`` principal made at ``path`` should carry
    (``admins``: the principal's digest ids, two during a secret rotation).
    None: not a node of the cluster."""
    root = paths.cluster_root
    if path != root and not path.startswith(root + "/"):
        return None
    everyone = sorted(zid for zid, _ in users.values() if zid)
    parts = path[len(root):].strip("/").split("/") if path != root else []
    if not parts or parts[0] != "groups" and parts[0] != "auth":
        return _acl(admins, ((i, READ) for i in everyone))
    if parts[0] == "auth":
        if parts[1:] == ["config"]:
            return _acl(admins, ()) + [ACL(READ, WORLD)]
        if len(parts) == 3 and parts[1] == "users":
            zid = users.get(parts[2], ("", None))[0]
            return _acl(admins, [(zid, READ)] if zid else ())
        return _acl(admins, ())
    if len(parts) == 1:
        return _acl(admins, ())
    members = group_users(parts[1], users)
    if len(parts) == 2:
        return _acl(admins, ((i, READ) for i in members))
    if len(parts) == 3 and parts[2] in CONTAINERS:
        return _acl(admins, ((i, READ | CREATE | DELETE) for i in members))
    return _acl(admins, ((i, READ) for i in members))    # a node an admin made there


def made_node_acl(admins: Iterable[str], readers: Iterable[str], own: str) -> list[ACL]:
    """The ACL of a node a user's client makes (own digest id ``own``) in a
    group: its maker reads and writes it, the brokers' principal
    (``admins``) everything (ZooKeeper shows the ids of an ACL only to who
    holds ADMIN on it, and a sweep must see who made a node; it changes
    only the principal's entries, at a secret rotation's step:
    ``with_principal``), the group's users (``readers``) read it. A client
    learns ``admins`` and ``readers`` from the group's node
    (``GroupAccessNode``): ZooKeeper hides the digest ids in the ACLs it
    shows a client."""
    admins = tuple(admins)
    out = [ACL(ALL, digest(a)) for a in admins]
    if own not in admins:
        out.append(ACL(READ | WRITE, digest(own)))
    out += [ACL(READ, digest(r)) for r in readers if r != own and r not in admins]
    return out


def ours(acl: Iterable[ACL], admins: tuple[str, ...], retired: tuple[str, ...] = ()) -> bool:
    """Whether ``duomq`` made a node with this ACL: one of ``admins`` or
    ``retired`` holds ADMIN on it and nobody else may write it (``retired``:
    the ids of rotated-out cluster secrets; for a persistent node also the
    shared client identity of earlier releases)."""
    acl = list(acl)
    mine = {digest(a) for a in (*admins, *retired)}
    if not any(e.id in mine and e.perms & ADMIN for e in acl):
        return False
    return all(e.id in mine or not e.perms & (WRITE | ADMIN) for e in acl)


def maker(acl: Iterable[ACL], admins: tuple[str, ...]) -> str | None:
    """The digest id of the user whose client made a node (the one entry
    that may write it besides ``admins``, current or retired); None: a node
    a user did not make."""
    mine = {digest(a) for a in admins}
    writers = [e.id for e in acl if e.perms & WRITE and e.id not in mine]
    if len(writers) != 1 or writers[0].scheme != "digest":
        return None
    return writers[0].id


def with_principal(acl: Iterable[ACL], admins: tuple[str, ...],
                   former: tuple[str, ...]) -> list[ACL] | None:
    """A node a user's client made (``made_node_acl``), its principal's
    entries made ``admins``' after a step of a secret rotation (the next
    secret's id added, a retired one taken off); its maker's and readers'
    entries as they are. None: already so."""
    acl = list(acl)
    mine = {digest(a) for a in (*admins, *former)}
    want = [ACL(ALL, digest(a)) for a in admins] + [e for e in acl if e.id not in mine]
    return None if same(acl, want) else want


def world_writable(acl: Iterable[ACL]) -> bool:
    return any(e.id == WORLD and e.perms & (WRITE | CREATE | DELETE | ADMIN) for e in acl)


def same(a: Iterable[ACL], b: Iterable[ACL]) -> bool:
    key = lambda e: (e.id.scheme, e.id.id, e.perms)     # noqa: E731
    return sorted(map(key, a)) == sorted(map(key, b))


def group_access(group: str, admins: tuple[str, ...],
                 users: Mapping[str, tuple[str, Policy]]) -> GroupAccessNode:
    """What a group's node holds for its clients (``made_node_acl``)."""
    return GroupAccessNode(tuple(admins), tuple(group_users(group, users)))


def group_of(path: str, paths: ZkPaths) -> str | None:
    """The consumer group whose own node ``path`` is (None: another node)."""
    prefix = paths.consumer_groups + "/"
    if not path.startswith(prefix) or "/" in path[len(prefix):]:
        return None
    return path[len(prefix):]
