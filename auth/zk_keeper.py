"""Keeping a secured cluster's ZooKeeper ACLs as ``auth.zk_acls`` says.

A sweep reads the users from ZooKeeper (not a watch's view: another broker
or the admin's command may have changed them a moment ago), walks the
cluster's nodes and

- sets the ACL ``zk_acls.wanted`` gives on every node the ``duomq``
  principal made whose ACL differs (a user added or removed, a policy
  changed: users' READ on the cluster's nodes, a group's users on its
  nodes), and each group's node's ``GroupAccessNode`` (the ids its clients
  give the nodes they make);
- deletes the nodes a user's client made (group membership, queue owners,
  offset resets) whose maker is no user any more (removed, or its key and
  login rotated): its session may live on, but it can do nothing;
- on the nodes a user's client made in its group's containers, makes the
  principal's entries the ids ``auth/admins`` lists (a secret rotation's
  step), their maker's and readers' entries kept;
- never changes the ACL of a node anyone else made. Nodes open to anyone,
  made before the cluster was secured, are counted and named in a warning;
  ``duomq auth lock`` (``lock_open_nodes``) gives the persistent ones the
  cluster's ACLs when an admin says so.

Sweeps run on every broker with auth (at start, and when it sees the users
change) and in ``duomq auth user`` after each change, so a change takes
effect within a round trip per node. Two sweeps at once are safe: each sets
an ACL only if the node's ACL version is the one it read, a user's nodes are
deleted only after a second, fresh read of the users, and a sweep that lost
a race is followed by the one that won it.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from kazoo.exceptions import BadVersionError, NoAuthError, NodeExistsError, NoNodeError
from kazoo.security import ACL

from duomq.auth import zk_acls
from duomq.auth.acl import Policy
from duomq.auth.user import User
from duomq.common.errors import ConfigError
from duomq.common.service import ServiceThread
from duomq.coordinator.auth_nodes import AdminsNode
from duomq.coordinator.group_nodes import GroupAccessNode
from duomq.coordinator.nodes import NodeError
from duomq.coordinator.paths import ROOT, ZkPaths
from duomq.coordinator.zk_login import admin_ids, retired_ids

log = logging.getLogger(__name__)
BATCH = 256                 # nodes read at once (asynchronous calls in flight)
ROTATION_SETTLE_S = 5.0     # a rotation step's second sweep, after the first


def read_users(zk, paths: ZkPaths) -> dict[str, tuple[str, Policy]]:
    """name -> (ZooKeeper digest id, policy), as ZooKeeper has them now.
    A user node that cannot be read is left out (it grants nothing)."""
    try:
        names = zk.get_children(paths.auth_users)
    except NoNodeError:
        return {}
    reads = [(n, zk.get_async(paths.auth_user(n))) for n in names]
    out = {}
    for name, result in reads:
        try:
            user = User.from_node(name, result.get()[0])
        except (NoNodeError, ConfigError, ValueError):
            continue
        out[name] = (user.zookeeper_id, user.policy)
    return out


@dataclass
class Sweep:
    """What one sweep did."""
    nodes: int = 0
    changed: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    open_nodes: list[str] = field(default_factory=list)     # anyone may write them
    locked: list[str] = field(default_factory=list)         # ``lock``: open nodes given ours

    def summary(self) -> str:
        return (f"{self.nodes} nodes: {len(self.changed)} ACLs set, {len(self.deleted)} nodes "
                f"of removed users deleted" + (f", {len(self.locked)} open nodes locked"
                                               if self.locked else ""))


class AclSweeper:
    """One cluster's sweeps, as the ``duomq`` principal with digest ids
    ``admins`` (``retired``: the shared client id of earlier releases)."""

    def __init__(self, zk, cluster: str, admins: tuple[str, ...], retired: tuple[str, ...] = ()):
        self.zk = zk
        self.paths = ZkPaths(cluster)
        self.own = admins
        self.admins = admins                # and those ``auth/admins`` lists (a rotation's)
        self.retired = retired
        self.former: tuple[str, ...] = ()   # rotated-out secrets' ids
        self._lock = threading.Lock()

    @classmethod
    def for_access(cls, zk, cluster: str, access: dict) -> AclSweeper:
        """The sweeper of the ``duomq`` principal that ``access`` logs in as."""
        return cls(zk, cluster, admin_ids(access), retired_ids(access))

    def load_admins(self) -> None:
        """The principal's ids as ``auth/admins`` says (a secret rotation)."""
        try:
            node = AdminsNode.from_bytes(self.zk.get(self.paths.auth_admins)[0])
        except (NoNodeError, NodeError):
            node = AdminsNode()
        self.admins = tuple(dict.fromkeys((*self.own, *node.ids)))
        self.former = tuple(i for i in node.retired if i not in self.admins)

    def wanted(self, path: str, users) -> list | None:
        return zk_acls.wanted(path, self.paths, self.admins, users)

    def sweep(self, lock_open: bool = False) -> Sweep:
        """One pass over the cluster's nodes (``lock_open``: also give the
        persistent nodes anyone may write the cluster's ACLs)."""
        with self._lock:
            return self._sweep(lock_open)

    def _sweep(self, lock_open: bool) -> Sweep:
        self.load_admins()
        users = read_users(self.zk, self.paths)
        zids = {zid for zid, _ in users.values() if zid}
        # what this session creates from now on: the cluster's ACL for its nodes
        self.zk.default_acl = self.wanted(self.paths.cluster_root, users)
        done = Sweep()
        orphans: list[str] = []
        groups: list[str] = []          # consumer groups whose node is ours
        todo = [self.paths.cluster_root]
        while todo:
            level, todo = todo[:BATCH], todo[BATCH:]
            reads = [(p, self.zk.get_acls_async(p), self.zk.get_children_async(p)) for p in level]
            for path, acls, children in reads:
                try:
                    acl, stat = acls.get()
                except (NoNodeError, NoAuthError):
                    continue
                done.nodes += 1
                try:
                    todo.extend(f"{path}/{c}" for c in children.get())
                except (NoNodeError, NoAuthError):
                    pass
                if self._visit(path, acl, stat, users, zids, done, orphans, lock_open):
                    group = zk_acls.group_of(path, self.paths)
                    if group is not None:
                        groups.append(group)
        self._group_access(groups, users, done)
        self._close_root(done)
        if orphans:
            self._delete_orphans(orphans, done)
        if done.open_nodes and not lock_open:
            log.warning("%d nodes of cluster %s may be changed by anyone (made before the "
                        "cluster was secured, or by a tool without credentials), e.g. %s: "
                        "`duomq auth lock` gives the persistent ones the cluster's ACLs",
                        len(done.open_nodes), self.paths.cluster, done.open_nodes[0])
        return done

    def _visit(self, path, acl, stat, users, zids, done, orphans, lock_open) -> bool:
        """Whether the node is (now) ours."""
        ephemeral = bool(stat.ephemeralOwner)
        if zk_acls.world_writable(acl):
            if lock_open and not ephemeral:
                if self._set(path, self.wanted(path, users), stat.aversion):
                    done.locked.append(path)
                    return True
            else:
                done.open_nodes.append(path)
            return False
        if zk_acls.ours(acl, self.admins,
                        self.former + (() if ephemeral else self.retired)):
            want = self.wanted(path, users)
            if want is not None and not zk_acls.same(acl, want):
                if self._set(path, want, stat.aversion):
                    done.changed.append(path)
            return True
        made_by = zk_acls.maker(acl, self.admins + self.former)
        if made_by is None or not self._in_group_container(path):
            return False
        if made_by not in zids:
            orphans.append((path, made_by))
        elif self._holds_admin(acl):
            # a secret rotation's ids on what a user's client made: the nodes
            # a consumer made before ``new`` readable with the next secret,
            # and none left to a retired one
            want = zk_acls.with_principal(acl, self.admins, self.former)
            if want is not None and self._set(path, want, stat.aversion):
                done.changed.append(path)
        return False

    def _holds_admin(self, acl) -> bool:
        """Whether this session may set the ACL (an id it logs in with
        holds ADMIN on it)."""
        mine = {zk_acls.digest(a) for a in self.own}
        return any(e.id in mine and e.perms & zk_acls.ADMIN for e in acl)

    def _group_access(self, groups: list[str], users, done: Sweep) -> None:
        """Each group's node says who its brokers and users are (its
        clients give what they make that ACL)."""
        reads = [(g, self.zk.get_async(self.paths.consumer_group(g))) for g in groups]
        for group, read in reads:
            want = zk_acls.group_access(group, self.admins, users)
            try:
                raw, stat = read.get()
                if raw and GroupAccessNode.from_bytes(raw) == want:
                    continue
            except NoNodeError:
                continue
            except NodeError:
                pass                    # damaged: written again
            try:
                self.zk.set(self.paths.consumer_group(group), want.to_bytes(),
                            version=stat.version)
                done.changed.append(self.paths.consumer_group(group))
            except (NoNodeError, BadVersionError):
                pass

    def _in_group_container(self, path: str) -> bool:
        parts = path[len(self.paths.consumer_groups):].strip("/").split("/")
        return (path.startswith(self.paths.consumer_groups + "/") and len(parts) == 3
                and parts[1] in zk_acls.CONTAINERS)

    def _close_root(self, done: Sweep) -> None:
        """The root every cluster lives under (``/duomq``): made open by
        whoever came first, anyone could change its data or its ACL. Left
        open to reading and to making a cluster's node (other clusters of
        the ensemble make theirs); the rest is the admins'."""
        try:
            acl, stat = self.zk.get_acls(ROOT)
        except (NoNodeError, NoAuthError):
            return
        closed = [ACL(zk_acls.READ | zk_acls.CREATE, zk_acls.WORLD)] + \
            [ACL(zk_acls.ALL, zk_acls.digest(a)) for a in self.admins]
        if any(e.id == zk_acls.WORLD and e.perms & ~(zk_acls.READ | zk_acls.CREATE)
               for e in acl):
            try:
                if self._set(ROOT, closed, stat.aversion):
                    done.locked.append(ROOT)
            except NoAuthError:
                pass                        # another cluster's admins closed it: theirs

    def _set(self, path: str, acl, aversion: int) -> bool:
        try:
            self.zk.set_acls(path, acl, version=aversion)
            return True
        except (NoNodeError, BadVersionError):
            return False        # gone, or another sweep set it meanwhile

    def _delete_orphans(self, orphans, done: Sweep) -> None:
        # read the users again: one added since this sweep began keeps its nodes
        zids = {zid for zid, _ in read_users(self.zk, self.paths).values() if zid}
        for path, made_by in orphans:
            if made_by in zids:
                continue
            try:
                self.zk.delete(path)
                done.deleted.append(path)
                log.info("deleted %s: its maker (%s) is no user any more", path,
                         made_by.split(":", 1)[0])
            except NoNodeError:
                pass

    def ensure_group(self, group: str) -> None:
        """A consumer group's nodes, with its users' rights, for its clients
        to join (they may not create nodes outside their groups' containers)."""
        base = self.paths.consumer_group(group)
        if all(self.zk.exists(f"{base}/{c}") for c in zk_acls.CONTAINERS):
            return
        self.load_admins()
        users = read_users(self.zk, self.paths)
        access = zk_acls.group_access(group, self.admins, users).to_bytes()
        for path in (self.paths.consumer_groups, base,
                     *(f"{base}/{c}" for c in zk_acls.CONTAINERS)):
            try:
                self.zk.create(path, access if path == base else b"",
                               acl=self.wanted(path, users))
            except NodeExistsError:
                pass


class AclKeeper(ServiceThread):
    """A broker's sweeper thread: a sweep at start and after every change
    of the users (woken by the user registry); consumer groups its clients
    name get their nodes (``heard``)."""
    name = "zk-acls"

    def __init__(self, sweeper: AclSweeper):
        super().__init__()
        self.sweeper = sweeper
        self._groups: set[str] = set()
        self._pending = threading.Lock()
        self._sweep_due = True
        self._again_at: float | None = None     # a rotation step's second sweep (monotonic)

    def users_changed(self) -> None:
        self._sweep_due = True
        self.wakeup()

    def admins_changed(self) -> None:
        """``auth/admins`` changed (a step of a secret rotation): a sweep,
        which reads it first, and another ``ROTATION_SETTLE_S`` later for
        the nodes a client makes with the ids it read just before the step
        (its read and its create are a round trip apart)."""
        log.info("the ZooKeeper ids of the cluster's principal changed (a secret rotation): "
                 "sweeping the ACLs")
        self._again_at = time.monotonic() + ROTATION_SETTLE_S
        self.users_changed()

    def heard(self, groups) -> None:
        """Consumer groups a client named (any thread): each is checked on
        this thread (one read when its nodes exist; a group deleted since is
        made again)."""
        with self._pending:
            new = set(groups) - self._groups
            self._groups.update(new)
        if new:
            self.wakeup()

    def run(self) -> None:
        while not self.stopped:
            with self._pending:
                groups, self._groups = self._groups, set()
            for group in sorted(groups):
                try:
                    self.sweeper.ensure_group(group)
                except Exception as exc:        # heard again at its next heartbeat
                    log.warning("cannot create the nodes of consumer group %s: %s", group, exc)
            again = self._again_at
            if again is not None and time.monotonic() >= again:
                self._again_at = None
                self._sweep_due = True
            if self._sweep_due:
                self._sweep_due = False
                try:
                    done = self.sweeper.sweep()
                    if done.changed or done.deleted:
                        log.info("ZooKeeper ACLs: %s", done.summary())
                except Exception as exc:
                    log.warning("ZooKeeper ACL sweep failed (%s); tried again in 30 s", exc)
                    self._sweep_due = True
                    self.wait_for_running(30.0)
                    continue
            again = self._again_at
            self.wait_for_running(60.0 if again is None else
                                  max(0.0, min(60.0, again - time.monotonic())))
