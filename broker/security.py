"""A secured broker (``auth = true``): CURVE on its client and replication
sockets with the cluster's broker keypair, the ZAP handler (``zmq.auth``),
the users from ZooKeeper, the guard that checks every request, and the
keeper of the cluster's ZooKeeper ACLs (``auth.zk_keeper``). The cluster's
``auth`` node tells clients that credentials are needed, and the admin user
of ``auth_dir`` is registered if ZooKeeper has no user of that name yet."""

from __future__ import annotations

import logging

import zmq
from kazoo.exceptions import NodeExistsError
from kazoo.security import OPEN_ACL_UNSAFE

from duomq.auth.acl import ADMIN
from duomq.auth.credentials import load_admin_key, load_broker_keys, load_broker_trust
from duomq.auth.domains import CLIENT_DOMAIN, HA_DOMAIN
from duomq.auth.guard import Guard
from duomq.auth.user import User
from duomq.auth.users import UserAdmin, UserRegistry
from duomq.auth.zk_keeper import AclKeeper, AclSweeper
from duomq.common.config import BrokerConfig
from duomq.common.errors import ConfigError
from duomq.common.zk_tls import load_ca
from duomq.coordinator import zk as zkutil
from duomq.coordinator.auth_nodes import AuthConfigNode
from duomq.coordinator.paths import ROOT, ZkPaths
from duomq.coordinator.zk_login import load_zk_secret, zk_access_for_admin

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
        self.zk_access = zk_access_for_admin(load_zk_secret(config.auth_dir),
                                             load_ca(config.auth_dir))
        self.users = UserRegistry(config.cluster)
        self.guard = Guard(self.users, config.cluster)
        from duomq.auth.zap import BrokerAuthenticator  # zmq.auth's thread: only with auth
        self.authenticator = BrokerAuthenticator(ctx, self.trusted, self.users)
        self.sweeper: AclSweeper | None = None
        self.keeper: AclKeeper | None = None

    def start_zap(self) -> None:
        """Before the sockets bind: every handshake goes through ZAP."""
        self.authenticator.start()

    def start(self, zk) -> None:
        """With ZooKeeper (connected as ``duomq``): the cluster's roots, its
        nodes' ACLs (a first sweep, then the keeper's), the users, the
        cluster's auth node, the admin."""
        paths = ZkPaths(self.config.cluster)
        self.sweeper = AclSweeper.for_access(zk, self.config.cluster, self.zk_access)
        # the root all clusters share stays open: another (plain) cluster may
        # live beside this one; the cluster's own roots are made as ours
        zk.ensure_path(ROOT, acl=OPEN_ACL_UNSAFE)
        for path in (paths.cluster_root, paths.brokers, paths.topics, paths.routes,
                     paths.consumer_groups, paths.auth_root, paths.auth_users):
            if not zk.exists(path):
                try:
                    zk.create(path, b"", acl=self.sweeper.wanted(path, {}))
                except NodeExistsError:
                    pass
        doc = AuthConfigNode(True, self.keys.public.decode(),
                             tuple(k.decode() for k in self.trusted)).to_bytes()
        try:
            zk.create(paths.auth_config, doc, acl=self.sweeper.wanted(paths.auth_config, {}))
        except NodeExistsError:
            zk.set(paths.auth_config, doc)
        if self.admin is not None:
            name, key = self.admin
            if UserAdmin(zk, self.config.cluster).ensure(User(name, key, ADMIN)):
                log.info("registered the admin user %s from auth_dir", name)
        self.sweeper.sweep()            # the cluster's ACLs as its users are now
        self.keeper = AclKeeper(self.sweeper)
        self.users.listeners.append(self.keeper.users_changed)
        self.users.start(zk)
        self.keeper.start()
        keeper = self.keeper

        # a step of a secret rotation (``duomq auth rotate``) rewrites the ids
        # auth/admins lists: swept again, so that the nodes this broker makes
        # from now on carry them (after ``new``, the new secret's id beside the
        # old; after ``retire``, not the old one), and those it made meanwhile
        # are set so too. The watch calls back at first (the start's sweep has
        # read that) and then only when the node's version moved, with no
        # event when it learns so on a new session: every later call is a step
        first = [True]

        @zk.DataWatch(paths.auth_admins)
        def _admins(_data, _stat) -> None:
            if first:
                first.clear()
            else:
                keeper.admins_changed()

    def group_nodes(self, groups) -> None:
        """Consumer groups a client named: their nodes, for their members."""
        if self.keeper is not None:
            self.keeper.heard(groups)

    def stop(self) -> None:
        if self.keeper is not None:
            self.keeper.shutdown(timeout_s=2.0)
        self.users.read.set()        # a handshake waiting for them ends (refused: none known)
        self.authenticator.stop()


def refuse_plaintext_in_secured_cluster(zk, cluster: str) -> None:
    """A broker with auth = false must not join a secured cluster: as master
    it would serve anyone, in the clear."""
    if zkutil.cluster_secured(zk, cluster):
        raise ConfigError(f"cluster {cluster!r} is secured (its brokers published "
                          f"{ZkPaths(cluster).auth_config}): this broker has auth = false; set "
                          f"auth = true and auth_dir, or delete that node to turn security off "
                          f"for the whole cluster")
