"""The ACL of a node a client makes in a secured cluster (group membership,
queue owners, offset resets): its maker reads and writes it, the brokers
may clean it up, the group's users read it (``auth.zk_acls.made_node_acl``,
with the ids the group's node holds). A client without a digest login (a cluster
without auth) makes open nodes, as before."""

from __future__ import annotations

from kazoo.exceptions import NoAuthError, NoNodeError

from duomq.auth.zk_acls import made_node_acl
from duomq.coordinator.group_nodes import GroupAccessNode
from duomq.coordinator.nodes import NodeError
from duomq.coordinator.zk_login import digest_id


def own_id(zk) -> str | None:
    """The digest id this session logged in with (None: no digest login)."""
    for scheme, credential in zk.auth_data:
        if scheme == "digest":
            user, password = credential.split(":", 1)
            return digest_id(user, password)
    return None


def acl_in_group(zk, group_node: str):
    """The ACL for a node this session makes in the group whose node is
    ``group_node`` (None: the session's default: open, on a cluster without
    auth, where ``connect`` leaves the session no default ACL whatever its
    login). The group's node says who the brokers and its users are; one
    that cannot be read leaves the node to its maker and the brokers it
    names, or to its maker alone."""
    own = own_id(zk)
    if own is None or zk.default_acl is None:
        return None
    try:
        access = GroupAccessNode.from_bytes(zk.get(group_node)[0])
    except (NoNodeError, NoAuthError, NodeError):
        access = GroupAccessNode()
    return made_node_acl(access.admins, access.readers, own)
