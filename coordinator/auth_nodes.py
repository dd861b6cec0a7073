"""The znodes of a secured cluster (``auth = true``), each a frozen dataclass
with ``to_bytes`` / ``from_bytes`` (pure, as ``nodes``). Keys are Z85 text.

  kind         path (under /duomq/<cluster>/auth)   written by
  auth config  config                                every broker with auth = true
  user         users/<name>                          ``duomq auth user``
  admins       admins                                ``duomq auth rotate``
"""

from __future__ import annotations

from dataclasses import dataclass

from duomq.coordinator.nodes import NodeError, _bool, _str, _strs, decode, encode


@dataclass(frozen=True)
class AuthConfigNode:
    """That the cluster is secured, and the broker keys it serves with: the
    key the last broker started serves with, and every key the brokers
    accept (two during a key rotation)."""
    enabled: bool = False
    broker_public_key: str = ""
    broker_public_keys: tuple[str, ...] = ()

    @classmethod
    def from_bytes(cls, raw: bytes | None) -> AuthConfigNode:
        k = "auth config"
        d = decode(k, raw)
        return cls(_bool(k, d, "enabled", False), _str(k, d, "broker_public_key", ""),
                   _strs(k, d, "broker_public_keys"))

    def to_bytes(self) -> bytes:
        return encode({"enabled": self.enabled, "broker_public_key": self.broker_public_key,
                       "broker_public_keys": list(self.broker_public_keys)})

    @property
    def accepted_keys(self) -> tuple[str, ...]:
        """Every broker key the brokers accept (the served one, at least)."""
        return self.broker_public_keys or ((self.broker_public_key,)
                                           if self.broker_public_key else ())


@dataclass(frozen=True)
class UserNode:
    """A user: its CURVE public key, its policy's permissions as text
    (``auth.acl.Policy`` parses them), and the digest id of its ZooKeeper
    login (``user:base64(sha1(user:password))``; the password is only in
    the user's credentials). A user of an earlier release has no id: it
    reaches ZooKeeper once its key is rotated."""
    public_key: str
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    zookeeper_id: str = ""
    quotas: tuple[tuple[str, int], ...] = ()   # the user's own, in place of the brokers'

    @classmethod
    def from_bytes(cls, raw: bytes | None) -> UserNode:
        k = "user"
        d = decode(k, raw)
        quotas = d.get("quotas", {})
        if not isinstance(quotas, dict) or not all(
                isinstance(n, str) and isinstance(v, int) and not isinstance(v, bool)
                for n, v in quotas.items()):
            raise NodeError(f"{k} node: quotas must map names to counts, got {quotas!r}")
        return cls(_str(k, d, "public_key", ""), _strs(k, d, "allow"), _strs(k, d, "deny"),
                   _str(k, d, "zookeeper_id", ""), tuple(sorted(quotas.items())))

    def to_bytes(self) -> bytes:
        return encode({"public_key": self.public_key, "allow": list(self.allow),
                       "deny": list(self.deny),
                       **({"zookeeper_id": self.zookeeper_id} if self.zookeeper_id else {}),
                       **({"quotas": dict(self.quotas)} if self.quotas else {})})


@dataclass(frozen=True)
class AdminsNode:
    """The ZooKeeper digest ids of the ``duomq`` principal besides the one a
    session logs in with: during a rotation of the cluster secret both the
    current and the next (``ids``), and the ids of secrets rotated out
    (``retired``), whose entries sweeps remove wherever they find them."""
    ids: tuple[str, ...] = ()
    retired: tuple[str, ...] = ()

    @classmethod
    def from_bytes(cls, raw: bytes | None) -> AdminsNode:
        k = "admins"
        d = decode(k, raw)
        return cls(_strs(k, d, "ids", digest_ids=True), _strs(k, d, "retired", digest_ids=True))

    def to_bytes(self) -> bytes:
        return encode({"ids": list(self.ids), "retired": list(self.retired)})
