"""Users in ZooKeeper: ``/duomq/<cluster>/auth/users/<name>`` holds a user's
CURVE public key (Z85) and its policy. ``UserAdmin`` writes them (the
``duomq auth user`` commands); ``UserRegistry`` is a broker's live view,
kept by watches, so an added, changed or removed user takes effect on
every broker at once."""

from __future__ import annotations

import logging
import threading

from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch
from kazoo.security import ACL, Id, Permissions

from duomq.auth.user import RESERVED, User
from duomq.auth.zk_keeper import AclSweeper
from duomq.common.errors import ConfigError
from duomq.common.names import validate_name
from duomq.coordinator.paths import ZkPaths
from duomq.coordinator.zk_login import ZK_ADMIN

log = logging.getLogger(__name__)


class UserAdmin:
    """An admin's writes of the users. When the session is the ``duomq``
    principal's (an admin's credentials, a broker), each change is followed
    by a sweep of the cluster's ZooKeeper ACLs (``auth.zk_keeper``), so it
    holds in ZooKeeper when the call returns (the brokers sweep too when
    they see it); the sweep's report is returned."""

    def __init__(self, zk, cluster: str):
        self.zk = zk
        self.paths = ZkPaths(cluster)
        self.sweeper = None
        login = next((c for s, c in zk.auth_data if s == "digest"), "")
        if login.startswith(ZK_ADMIN + ":"):
            access = {"digest": login}
            self.sweeper = AclSweeper.for_access(zk, cluster, access)

    def _swept(self):
        return self.sweeper.sweep() if self.sweeper is not None else None

    def add(self, user: User):
        validate_name("user", user.name)
        if user.name in RESERVED:
            raise ConfigError(f"user name {user.name!r} is reserved")
        self.zk.ensure_path(self.paths.auth_users)
        # as its parent's (the admins'), and the user reads its own node
        acl, _ = self.zk.get_acls(self.paths.auth_users)
        if user.zookeeper_id:
            acl = [*acl, ACL(Permissions.READ, Id("digest", user.zookeeper_id))]
        try:
            self.zk.create(self.paths.auth_user(user.name), user.to_node(), acl=acl)
        except NodeExistsError:
            raise ConfigError(f"user {user.name!r} exists (use update)") from None
        return self._swept()

    def ensure(self, user: User) -> bool:
        """Add ``user`` unless one of that name exists; True if added."""
        try:
            self.add(user)
            return True
        except ConfigError:
            return False

    def update(self, user: User):
        try:
            self.zk.set(self.paths.auth_user(user.name), user.to_node())
        except NoNodeError:
            raise ConfigError(f"user {user.name!r} does not exist") from None
        return self._swept()

    def remove(self, name: str):
        try:
            self.zk.delete(self.paths.auth_user(name))
        except NoNodeError:
            raise ConfigError(f"user {name!r} does not exist") from None
        return self._swept()

    def get(self, name: str) -> User:
        try:
            raw, _ = self.zk.get(self.paths.auth_user(name))
        except NoNodeError:
            raise ConfigError(f"user {name!r} does not exist") from None
        return User.from_node(name, raw)

    def list(self) -> list[User]:
        try:
            names = sorted(self.zk.get_children(self.paths.auth_users))
        except NoNodeError:
            return []
        out = []
        for n in names:
            try:
                out.append(self.get(n))
            except ConfigError:
                continue
        return out


class UserRegistry:
    """The users as ZooKeeper has them now (watches; kazoo's threads write,
    the ZAP handler and the request loop read whole-dict snapshots)."""

    def __init__(self, cluster: str):
        self.zk = None
        self.paths = ZkPaths(cluster)
        self._lock = threading.Lock()
        self._users: dict[str, User] = {}
        self.by_key: dict[bytes, User] = {}        # Z85 public key -> user
        self._watched: set[str] = set()
        self.version = 0                           # bumped on every change
        self.listeners: list = []                  # called (no arguments) after a change
        self.read = threading.Event()              # set once the users were read (or never
                                                   # will be: the broker stops)

    def start(self, zk) -> UserRegistry:
        """Load the users and watch them (until then no user key is known).
        kazoo's watches read their nodes before they return, so ``read`` is
        set with every user in."""
        self.zk = zk
        zk.ensure_path(self.paths.auth_users)
        ChildrenWatch(self.zk, self.paths.auth_users, self._on_children)
        self.read.set()
        return self

    def _on_children(self, names: list[str]) -> None:
        # a user's data watch lives on after its node is deleted (kazoo then
        # watches for its creation), so a name removed and added again is
        # seen whatever order the two watches fire in
        with self._lock:
            new = set(names) - self._watched
            self._watched |= new
        for n in sorted(new):
            DataWatch(self.zk, self.paths.auth_user(n), self._watcher(n))

    def _watcher(self, name: str):
        # two parameters exactly: kazoo passes a third (the event) to a
        # function that takes three, default or not
        def watch(data, stat):
            return self._on_user(name, data, stat)
        return watch

    def _on_user(self, name: str, data: bytes | None, stat) -> bool | None:
        with self._lock:
            if stat is None:              # deleted (or not created yet)
                self._users.pop(name, None)
                self._publish()
                return None
            try:
                self._users[name] = User.from_node(name, data)
            except (ConfigError, ValueError) as exc:
                log.error("user %s in ZooKeeper is unusable (%s): refused until fixed", name, exc)
                self._users.pop(name, None)
            self._publish()
        return None

    def _publish(self) -> None:
        self.by_key = {u.public_key: u for u in self._users.values()}
        self.version += 1
        for listener in self.listeners:
            listener()

    def user(self, name: str) -> User | None:
        return self._users.get(name)
