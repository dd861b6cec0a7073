"""A secured broker (``auth = true``): CURVE on its client and replication
sockets with the cluster's broker keypair, the ZAP handler (``zmq.auth``),
the users from ZooKeeper, and the guard that checks every request. The
cluster's ``auth`` node tells clients that credentials are needed, and the
admin user of ``auth_dir`` is registered if ZooKeeper has no user of that
name yet."""

from __future__ import annotations

import logging

import zmq
from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.security import ACL, OPEN_ACL_UNSAFE, Id, Permissions

from duomq.auth.acl import ADMIN
from duomq.auth.guard import Guard
from duomq.auth.users import User, UserAdmin, UserRegistry
from duomq.auth.zap import CLIENT_DOMAIN, HA_DOMAIN, BrokerAuthenticator
from duomq.common.config import BrokerConfig
from duomq.common.credentials import (
    load_admin_key,
    load_broker_keys,
    load_broker_trust,
    load_zk_secret,
    zk_access_for_admin,
)
from duomq.common.errors import ConfigError
from duomq.coordinator import zk as zkutil
from duomq.coordinator.auth_nodes import AuthConfigNode
from duomq.coordinator.paths import ROOT, ZkPaths

log = logging.getLogger(__name__)


class BrokerSecurity:
    def __init__(self, config: BrokerConfig, ctx: zmq.Context, router: zmq.Socket,
                 ha_router: zmq.Socket):
        self.config = config
        self.keys = load_broker_keys(config.auth_dir)       # a ConfigError stops the start
        self.trusted = load_broker_trust(config.auth_dir)   # broker keys: its own, a rotation's
        self.admin = load_admin_key(config.auth_dir)
        for sock, domain in ((router, CLIENT_DOMAIN), (ha_router, HA_DOMAIN)):
            sock.curve_server = True
            sock.curve_secretkey = self.keys.secret
            sock.curve_publickey = self.keys.public
            sock.zap_domain = domain.encode()
        self.zk_access = zk_access_for_admin(load_zk_secret(config.auth_dir))
        self.users = UserRegistry(config.cluster)
        self.guard = Guard(self.users, config.cluster)
        self.authenticator = BrokerAuthenticator(ctx, self.trusted, self.users)

    def start_zap(self) -> None:
        """Before the sockets bind: every handshake goes through ZAP."""
        self.authenticator.start()

    def start(self, zk) -> None:
        """With ZooKeeper (connected as ``duomq``): the cluster's nodes
        secured, the users, the cluster's auth node, the admin."""
        paths = ZkPaths(self.config.cluster)
        secure_tree(zk, paths, self.zk_access)
        self.users.start(zk)
        doc = AuthConfigNode(True, self.keys.public.decode(),
                             tuple(k.decode() for k in self.trusted)).to_bytes()
        try:
            zk.create(paths.auth_config, doc, acl=special_acls(paths, self.zk_access)[
                paths.auth_config])
        except NodeExistsError:
            zk.set(paths.auth_config, doc)
        if self.admin is not None:
            name, key = self.admin
            if UserAdmin(zk, self.config.cluster).ensure(User(name, key, ADMIN)):
                log.info("registered the admin user %s from auth_dir", name)

    def stop(self) -> None:
        self.authenticator.stop()


def special_acls(paths: ZkPaths, access: dict) -> dict[str, list[ACL]]:
    """Nodes whose ACL differs from the default (``zkutil.node_acl``): users'
    clients create group membership and queue owners; anyone may read
    whether the cluster is secured. (Topics, groups' retry and dead-letter
    topics too, are made by admins and brokers only.)"""
    base = zkutil.node_acl(access)
    client = Id("digest", access["client_id"])
    return {paths.consumer_groups: [base[0], ACL(Permissions.ALL, client)],
            paths.auth_config: [base[0], ACL(Permissions.READ, Id("world", "anyone"))]}


def secure_tree(zk, paths: ZkPaths, access: dict) -> None:
    """Every node of the cluster that anyone may change (made before the
    cluster was secured, or by a tool without credentials) gets the secured
    ACL; the cluster's roots exist with theirs."""
    special = special_acls(paths, access)
    base = zkutil.node_acl(access)
    # the root all clusters share stays open: another (plain) cluster may
    # live beside this one
    zk.ensure_path(ROOT, acl=OPEN_ACL_UNSAFE)
    for path in (paths.cluster_root, paths.brokers, paths.topics, paths.routes,
                 paths.consumer_groups, paths.auth_root, paths.auth_users):
        zk.ensure_path(path, acl=special.get(path, base))
        # the roots' ACLs as this version wants them (an older one let
        # clients create topics)
        if sorted(map(str, zk.get_acls(path)[0])) != sorted(map(str, special.get(path, base))):
            zk.set_acls(path, special.get(path, base))
    world = Id("world", "anyone")
    todo = [paths.cluster_root]
    while todo:
        path = todo.pop()
        try:
            acl, _ = zk.get_acls(path)
            if any(a.id == world for a in acl) and path != paths.auth_config:
                zk.set_acls(path, special.get(path, base))
            todo.extend(f"{path}/{c}" for c in zk.get_children(path))
        except NoNodeError:
            continue


def refuse_plaintext_in_secured_cluster(zk, cluster: str) -> None:
    """A broker with auth = false must not join a secured cluster: as master
    it would serve anyone, in the clear."""
    if zkutil.cluster_secured(zk, cluster):
        raise ConfigError(f"cluster {cluster!r} is secured (its brokers published "
                          f"{ZkPaths(cluster).auth_config}): this broker has auth = false; set "
                          f"auth = true and auth_dir, or delete that node to turn security off "
                          f"for the whole cluster")
