"""Who sent a request, and whether they may (a secured broker's request
loop). The ZAP handler names every CURVE connection by ``curve_user_id``:
``"<user> <key>"``; each request's ``User-Id`` is checked against the users
as ZooKeeper has them now, so a removed user, or one whose key was
replaced, is refused on its open connections at once, not only on new ones."""

from __future__ import annotations

from duomq.auth.acl import Permission, needs
from duomq.auth.domains import BROKER_USER
from duomq.auth.users import UserRegistry
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
        needed = needs(request.type, request.message, self.cluster)
        if needed is None:
            return (pb.NOT_AUTHORIZED, f"request type {pb.RequestType.Name(request.type)} is "
                                       f"not a client request")
        lacking = self.lacking(name, tuple(needed))
        if lacking is not None:
            return (pb.NOT_AUTHORIZED, f"user {name!r} lacks the permission {lacking}")
        return None

    def lacking(self, name: str, needed: tuple[Permission, ...]) -> Permission | None:
        """The first of ``needed`` user ``name`` lacks (None: it has them all;
        a user no longer registered lacks the first)."""
        if not needed:
            return None
        cache_key = (self.users.version, name, needed)
        try:
            return self._decided[cache_key]
        except KeyError:
            pass
        user = self.users.user(name)
        lacking = needed[0] if user is None else user.policy.lacking(list(needed))
        if len(self._decided) >= CACHE_MAX:
            self._decided.clear()
        self._decided[cache_key] = lacking
        return lacking


def user_name(who: str | None) -> str | None:
    """The user a connection's User-Id names (None: the broker's own key,
    or no authentication on this broker)."""
    if not who:
        return None
    name = who.partition(" ")[0]
    return None if name == BROKER_USER else name
