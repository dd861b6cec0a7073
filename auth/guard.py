"""Who sent a request, and whether they may (a secured broker's request
loop). The ZAP handler names every CURVE connection by ``curve_user_id``:
``"<user> <key>"``; each request's ``User-Id`` is checked against the users
as ZooKeeper has them now, so a removed user, or one whose key was
replaced, is refused on its open connections at once, not only on new ones."""

from __future__ import annotations

from duomq.auth.acl import Permission, needs
from duomq.auth.users import UserRegistry
from duomq.auth.zap import BROKER_USER
from duomq.proto import pb


def user_id(name: str, key: bytes) -> str:
    return f"{name} {key.decode()}"


CACHE_MAX = 10_000


class Guard:
    def __init__(self, users: UserRegistry, cluster: str):
        self.users = users
        self.cluster = cluster
        # (registry version, user, needed permissions) -> the one lacking, or None
        self._decided: dict[tuple, Permission | None] = {}

    def check(self, who: str | None, request) -> tuple[int, str] | None:
        """None when ``who`` (a connection's User-Id) may make ``request``;
        else the status and text of the refusal."""
        name, _, key = (who or "").partition(" ")
        if name == BROKER_USER:
            return None
        user = self.users.user(name)
        if user is None or user.public_key.decode() != key:
            return (pb.AUTHENTICATION_FAILED,
                    f"user {name or 'anonymous'!r} is not (or no longer) registered with this "
                    f"key: removed, or given a new one")
        needed = tuple(needs(request.type, request.message, self.cluster))
        if not needed:
            return None
        cache_key = (self.users.version, name, needed)
        try:
            lacking = self._decided[cache_key]
        except KeyError:
            if len(self._decided) >= CACHE_MAX:
                self._decided.clear()
            lacking = self._decided[cache_key] = user.policy.lacking(list(needed))
        if lacking is not None:
            return (pb.NOT_AUTHORIZED, f"user {name!r} lacks the permission {lacking}")
        return None
