"""A user as ZooKeeper holds it (``/duomq/<cluster>/auth/users/<name>``):
its CURVE public key (Z85), its policy, its ZooKeeper login and its own
quotas. A value read and written whole; ``auth.users`` keeps them in
ZooKeeper, ``auth.zk_keeper`` reads them to sweep the ACLs."""

from __future__ import annotations

from dataclasses import dataclass

from duomq.auth.acl import Policy
from duomq.auth.quotas import Quotas
from duomq.common.curve import z85_key
from duomq.common.errors import ConfigError
from duomq.coordinator.auth_nodes import UserNode
from duomq.coordinator.nodes import NodeError
from duomq.coordinator.zk_login import ZK_ADMIN, ZK_CLIENT

# names ZAP gives the broker key and no key; ZooKeeper principals
RESERVED = frozenset({"broker", "anonymous", ZK_ADMIN, ZK_CLIENT})


@dataclass(frozen=True)
class User:
    name: str
    public_key: bytes           # Z85
    policy: Policy
    zookeeper_id: str = ""      # the digest id of its ZooKeeper login ("": a user of an earlier release)
    quotas: tuple[tuple[str, int], ...] = ()   # its own quotas (``auth.quotas``), by kind

    def to_node(self) -> bytes:
        policy = self.policy.to_json()
        return UserNode(self.public_key.decode(), tuple(policy["allow"]),
                        tuple(policy["deny"]), self.zookeeper_id, self.quotas).to_bytes()

    @classmethod
    def from_node(cls, name: str, raw: bytes | None) -> User:
        where = f"user {name!r} in ZooKeeper"
        try:
            node = UserNode.from_bytes(raw)
        except NodeError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        try:
            Quotas().over(dict(node.quotas))
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        return cls(name, z85_key(node.public_key, "public_key", where),
                   Policy.parse(node.allow, node.deny, stored=True), node.zookeeper_id,
                   node.quotas)
