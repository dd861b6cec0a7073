"""``duomq auth init|user``: the cluster's keys and its users.

``duomq auth init --out DIR`` writes, without touching any cluster:
  DIR/broker.key, DIR/broker.key_secret   the brokers' CURVE keypair (every broker's auth_dir)
  DIR/admin-user.key                       the admin user's name and public key (brokers register it)
  DIR/admin.json                           the admin's credentials (keep them with the operator)
  DIR/zookeeper.secret                     the digest secret duomq's ZooKeeper nodes are written with

``duomq auth user add NAME --allow Type:Name:Action ... [--deny ...] --out FILE``
registers NAME in ZooKeeper and writes its credentials file; ``list``,
``remove NAME`` and ``update NAME`` (new permissions, and ``--rotate --out
FILE`` for a new key: the old one stops working at once).

Each user logs in to ZooKeeper as itself (its credentials carry the login,
its node only the digest id); after every change the command sets the
cluster's ZooKeeper ACLs to match the users (``auth.zk_keeper``), and
``duomq auth lock`` gives nodes made before the cluster was secured (open to
anyone) the cluster's ACLs.

``duomq auth rotate new|promote|retire --auth-dir DIR`` rotates the
cluster's ZooKeeper secret the same way (``rotate``).

``duomq auth broker-key new|promote|retire --auth-dir DIR`` rotates the
brokers' keypair, a step at a time, each followed by a rolling restart of
the brokers; ``duomq auth trust`` makes a credentials file trust the broker
keys the cluster's brokers accept now (README: "Rotating the broker key").
"""

from __future__ import annotations

import os

from kazoo.exceptions import NoNodeError
from kazoo.security import ACL, Id, Permissions

from duomq.auth import quotas
from duomq.auth.acl import Policy
from duomq.auth.credentials import Credentials, init_cluster_keys, rotate_broker_keys
from duomq.auth.user import User
from duomq.auth.users import UserAdmin
from duomq.auth.zk_keeper import AclSweeper
from duomq.cli.common import add_endpoint, add_json, emit, endpoint, table
from duomq.common.curve import KeyPair
from duomq.common.errors import ConfigError
from duomq.common.zk_tls import DEFAULT_HOSTS, load_ca
from duomq.coordinator import zk as zkutil
from duomq.coordinator.auth_nodes import AdminsNode
from duomq.coordinator.paths import ZkPaths
from duomq.coordinator.zk_login import (
    CREDENTIALS_ENV,
    ZK_ADMIN,
    ZK_SASL,
    ZK_SECRET_NEXT,
    ZK_SECRET_PREVIOUS,
    admin_ids,
    digest_id,
    env_zk_access,
    env_zk_sasl,
    is_admin,
    load_zk_sasl,
    retired_ids,
    rotate_zk_secret_files,
    user_zk_login,
    zk_access_for_admin,
)

ADMIN_USER = "admin"


def add(sub) -> None:
    p = sub.add_parser("auth", help="the cluster's keys, users and their permissions")
    asub = p.add_subparsers(dest="auth_cmd", required=True)
    q = asub.add_parser("init", help="write the broker keypair, an admin user's credentials "
                                     "and the ZooKeeper secret to a directory")
    q.add_argument("--out", required=True, metavar="DIR")
    q.add_argument("--admin", default=ADMIN_USER, metavar="NAME", help="the admin's user name")
    q.add_argument("--zookeeper-sasl", metavar="USER", help="also a SASL (DIGEST-MD5) login "
                   "to the ZooKeeper ensemble, as USER with a new password (zookeeper.sasl); "
                   "prints the JAAS Server entry the ensemble needs")
    q.add_argument("--zookeeper-tls", action="store_true",
                   help="also the ensemble's TLS: a CA (zookeeper-ca.pem, also in the "
                        "credentials) and the servers' key and certificate "
                        "(zookeeper-server.pem) for their secure client port")
    q.add_argument("--zookeeper-host", action="append", default=[], metavar="NAME",
                   help="a name or address the ensemble is reached by, for its certificate "
                        "(repeat; wildcards such as *.zk.ns.svc; default localhost and "
                        "127.0.0.1)")
    q.set_defaults(func=init)
    q = asub.add_parser("user", help="add, update, remove and list users")
    usub = q.add_subparsers(dest="user_cmd", required=True)
    for name in ("add", "update", "remove", "list"):
        u = usub.add_parser(name)
        if name != "list":
            u.add_argument("name")
        if name in ("add", "update"):
            u.add_argument("--allow", action="append", default=[], metavar="Type:Name:Action",
                           help="a permission granted (repeat; Topic:NAME:Pub|Sub, "
                                "Group:NAME:Sub|Delete, Cluster:NAME:Get|Admin, or All for "
                                "the action; NAME may end in *)")
            u.add_argument("--deny", action="append", default=[], metavar="Type:Name:Action",
                           help="a permission refused, whatever --allow says (repeat)")
            u.add_argument("--out", metavar="FILE", help="write the user's credentials here")
            u.add_argument("--quota", action="append", default=[], metavar="KIND=N",
                           help="the user's own quota in place of the brokers' (repeat; "
                                "groups, share_groups, held_pops, open_transactions, clients, "
                                "connections; "
                                "on update, KIND= drops it)")
        if name == "update":
            u.add_argument("--rotate", action="store_true",
                           help="a new keypair (written to --out); the old key stops working")
        add_endpoint(u)
        add_json(u)
        u.set_defaults(func=user)
    q = asub.add_parser("broker-key", help="rotate the brokers' keypair in their auth_dir, "
                                           "a step at a time (each followed by a rolling "
                                           "restart of the brokers)")
    q.add_argument("step", choices=["new", "promote", "retire"],
                   help="new: a next keypair the brokers accept besides theirs; promote: "
                        "the next keypair becomes theirs, the old one still accepted; "
                        "retire: the old one accepted no more")
    q.add_argument("--auth-dir", required=True, metavar="DIR")
    q.set_defaults(func=broker_key)
    q = asub.add_parser("metrics-token", help="the bearer token a scrape of a secured "
                                              "broker's /metrics carries: written to "
                                              "auth_dir/metrics.token when missing (a cluster "
                                              "made before it); restart the brokers")
    q.add_argument("--auth-dir", required=True, metavar="DIR")
    q.set_defaults(func=metrics_token)
    q = asub.add_parser("trust", help="make a credentials file (--credentials) trust the "
                                      "broker keys the cluster accepts now")
    add_endpoint(q)
    q.set_defaults(func=trust)
    q = asub.add_parser("rotate", help="rotate the cluster's ZooKeeper secret in the brokers' "
                                       "auth_dir, a step at a time, without downtime")
    q.add_argument("step", choices=["new", "promote", "retire"],
                   help="new: a next secret ZooKeeper accepts beside the current one on every "
                        "node; promote: the next secret becomes the current one (then restart "
                        "the brokers one at a time); retire: the old secret is accepted no "
                        "more")
    q.add_argument("--auth-dir", required=True, metavar="DIR")
    add_endpoint(q)
    q.set_defaults(func=rotate)
    q = asub.add_parser("lock", help="give the cluster's nodes that anyone may change (made "
                                     "before it was secured) the cluster's ZooKeeper ACLs")
    add_endpoint(q)
    q.set_defaults(func=lock)


def init(args) -> int:
    if args.zookeeper_host and not args.zookeeper_tls:
        raise ConfigError("--zookeeper-host names the hosts of --zookeeper-tls's certificate")
    init_cluster_keys(args.out, args.admin, args.zookeeper_sasl, args.zookeeper_tls,
                      tuple(args.zookeeper_host) or DEFAULT_HOSTS)
    sasl = (", zookeeper.sasl" if args.zookeeper_sasl else "") + \
        (", zookeeper-ca.pem, zookeeper-server.pem" if args.zookeeper_tls else "")
    print(f"wrote {args.out}: broker.key, broker.key_secret, admin-user.key, "
          f"zookeeper.secret{sasl} (the brokers' auth_dir), {args.admin}.json (the admin's "
          f"credentials: keep them apart)")
    if args.zookeeper_tls:
        print("every ZooKeeper server's zoo.cfg needs (and no plain clientPort):\n"
              "  serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n"
              "  secureClientPort=2182\n"
              "  ssl.keyStore.location=/path/to/zookeeper-server.pem\n"
              "  ssl.keyStore.type=PEM\n"
              "  ssl.trustStore.location=/path/to/zookeeper-ca.pem\n"
              "  ssl.trustStore.type=PEM\n"
              "  ssl.clientAuth=none")
    if args.zookeeper_sasl:
        user, password = load_zk_sasl(os.path.join(args.out, ZK_SASL)).split(":", 1)
        print(f"every ZooKeeper server's JAAS Server section needs the login (with "
              f"authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider):\n"
              f"  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
              f"  user_{user}=\"{password}\";")
    return 0


def _admin_access() -> dict | None:
    """The admin's ZooKeeper access (the command runs with the admin's
    credentials); None on a cluster whose ZooKeeper is not secured."""
    access = env_zk_access()
    if access is not None and not is_admin(access):
        raise ConfigError("managing users needs the admin's credentials (--credentials or "
                          "$DUOMQ_CREDENTIALS: the admin.json of duomq auth init)")
    return access


def _new_zk_login(name: str) -> dict | None:
    """A new user's own ZooKeeper login (None: ZooKeeper is not secured);
    the ensemble's SASL login, where it asks for one, and its TLS CA, where
    it speaks only TLS, go to every user."""
    access = _admin_access()
    if access is None:
        return None
    sasl = access.get("sasl") or env_zk_sasl()
    return {**user_zk_login(name), **({"sasl": sasl} if sasl else {}),
            **({"tls_ca": access["tls_ca"]} if access.get("tls_ca") else {})}


def _zk_id(login: dict | None) -> str:
    return digest_id(*login["digest"].split(":", 1)) if login else ""


def _swept(sweep) -> str:
    """What the sweep after a change did (``UserAdmin``: the cluster's
    ZooKeeper ACLs match its users when the command ends)."""
    return f"; ZooKeeper: {sweep.summary()}" if sweep is not None else ""


def _broker_keys(zk, cluster: str) -> tuple[bytes, tuple[bytes, ...]]:
    """The key the cluster's brokers serve with, and every broker key they
    accept (during a rotation, two), as they published them."""
    node = zkutil.auth_config(zk, cluster)
    if not node.broker_public_key:
        raise ConfigError(f"cluster {cluster!r} has no broker with auth = true yet: its "
                          f"brokers' public key is unknown")
    return node.broker_public_key.encode(), tuple(k.encode() for k in node.accepted_keys)


def _credentials(name: str, keys: KeyPair, zk, cluster: str, access) -> Credentials:
    main, accepted = _broker_keys(zk, cluster)
    return Credentials(name, keys, main, access, accepted)


STEPS = {"new": "restart the brokers one at a time (each then accepts the next key too); "
                "then `duomq auth trust` every client's credentials (and restart the "
                "clients); then `promote`",
         "promote": "restart the brokers one at a time (each then serves the new key, and "
                    "still accepts the old one); then `retire`",
         "retire": "restart the brokers one at a time (the old key is then refused); then "
                   "`duomq auth trust` the credentials again to forget the old key"}


def metrics_token(args) -> int:
    from duomq.auth.credentials import write_metrics_token
    if not os.path.isdir(args.auth_dir):
        raise ConfigError(f"--auth-dir {args.auth_dir}: no such directory")
    path, wrote = write_metrics_token(args.auth_dir)
    print(f"{'wrote' if wrote else 'kept'} {path}: give Prometheus the same token "
          f"(authorization: {{type: Bearer, credentials_file: ...}}) and restart the brokers "
          f"for a new one to take effect")
    return 0


def broker_key(args) -> int:
    done = rotate_broker_keys(args.auth_dir, args.step)
    print(f"{args.auth_dir}: {done}. Next: {STEPS[args.step]}")
    return 0


def trust(args) -> int:
    path = args.credentials or os.environ.get(CREDENTIALS_ENV)
    if not path:
        raise ConfigError("duomq auth trust needs the credentials file to update "
                          "(--credentials FILE or $DUOMQ_CREDENTIALS)")
    old = Credentials.load(path)
    zookeeper, cluster = endpoint(args)
    zk = zkutil.connect(zookeeper, access=old.zookeeper)
    try:
        new = _credentials(old.user, old.keys, zk, cluster, old.zookeeper)
    finally:
        zkutil.close(zk)
    new.write(path)
    print(f"{path} trusts the broker keys " + ", ".join(k.decode() for k in new.broker_keys)
          + f" (cluster {cluster!r} serves {new.broker_public_key.decode()})")
    return 0


ROTATE_NEXT = {
    "new": "give every broker the auth_dir with zookeeper.secret.next (a Kubernetes Secret: "
           "replace it), then `promote`",
    "promote": "give every broker the auth_dir again and restart them one at a time (each "
               "then logs in with the new secret; the old one is still accepted); then "
               "`retire`",
    "retire": "done: the old secret is refused by ZooKeeper"}


def rotate(args) -> int:
    """``duomq auth rotate``: a step of a rotation of the cluster's ZooKeeper
    secret. ZooKeeper's side: ``auth/admins`` lists the principal's ids
    beside the one a session logs in with, and a sweep puts every id it
    lists on (``new``), or takes a retired one off (``retire``), every node
    the principal made."""
    zookeeper, cluster = endpoint(args)
    login, other = rotate_zk_secret_files(args.auth_dir, args.step)
    ca = load_ca(args.auth_dir)
    if args.step == "promote":
        moved = _promote_admin_credentials(args, other, login)
        print(f"{args.auth_dir}: zookeeper.secret is the new secret, the old one "
              f"zookeeper.secret.previous" + (f"; {moved} log in with it" if moved else "")
              + f". Next: {ROTATE_NEXT['promote']}")
        return 0
    access = zk_access_for_admin(login, ca)
    mine, theirs = admin_ids(access)[0], admin_ids(zk_access_for_admin(other))[0]
    try:
        zk = zkutil.connect(zookeeper, access=access, cluster=cluster)
    except Exception:
        if args.step == "new":
            os.remove(os.path.join(args.auth_dir, ZK_SECRET_NEXT))   # as before the step
        raise
    try:
        paths = ZkPaths(cluster)
        try:
            old = AdminsNode.from_bytes(zk.get(paths.auth_admins)[0])
        except NoNodeError:
            old = AdminsNode()
        node = AdminsNode((mine, theirs), old.retired) if args.step == "new" else \
            AdminsNode((), tuple(dict.fromkeys((*old.retired, theirs))))
        try:
            zk.set(paths.auth_admins, node.to_bytes())
        except NoNodeError:
            zk.create(paths.auth_admins, node.to_bytes(),
                      acl=[ACL(Permissions.ALL, Id("digest", i)) for i in (mine, theirs)])
        done = AclSweeper(zk, cluster, (mine,), retired_ids(access)).sweep()
    finally:
        zkutil.close(zk)
    if args.step == "retire":
        os.remove(os.path.join(args.auth_dir, ZK_SECRET_PREVIOUS))
    print(f"cluster {cluster}: {done.summary()}. Next: {ROTATE_NEXT[args.step]}")
    return 0


def _promote_admin_credentials(args, old: str, new: str) -> str:
    """The admin's credentials files (``auth_dir/admin.json``, and the
    ``--credentials`` one) that logged in with the old secret, rewritten."""
    done = []
    for path in dict.fromkeys(p for p in (os.path.join(args.auth_dir, "admin.json"),
                                          args.credentials or os.environ.get(CREDENTIALS_ENV))
                              if p and os.path.exists(p)):
        c = Credentials.load(path)
        if c.zookeeper and c.zookeeper["digest"] == f"{ZK_ADMIN}:{old}":
            Credentials(c.user, c.keys, c.broker_public_key,
                        {**c.zookeeper, "digest": f"{ZK_ADMIN}:{new}"},
                        c.trusted_broker_keys).write(path)
            done.append(path)
    return ", ".join(done)


def lock(args) -> int:
    zookeeper, cluster = endpoint(args)
    access = _admin_access()
    if access is None:
        raise ConfigError("duomq auth lock needs the admin's credentials (--credentials or "
                          "$DUOMQ_CREDENTIALS)")
    zk = zkutil.connect(zookeeper, cluster=cluster)
    try:
        done = AclSweeper.for_access(zk, cluster, access).sweep(lock_open=True)
        print(f"cluster {cluster}: {done.summary()}" + (
            f"; {len(done.open_nodes)} open ephemeral nodes are left to end with their "
            f"sessions" if done.open_nodes else ""))
    finally:
        zkutil.close(zk)
    return 0


def user(args) -> int:
    zookeeper, cluster = endpoint(args)
    zk = zkutil.connect(zookeeper, cluster=cluster)
    try:
        admin = UserAdmin(zk, cluster)
        if args.user_cmd == "list":
            users = admin.list()
            rows = [{"user": u.name, "public_key": u.public_key.decode(), **u.policy.to_json(),
                     "quotas": dict(u.quotas)} for u in users]
            if args.json:
                emit({"users": rows})
            else:
                print(table([[r["user"], " ".join(r["allow"]), " ".join(r["deny"]),
                              " ".join(f"{k}={v}" for k, v in r["quotas"].items()) or "-"]
                             for r in rows], ["user", "allow", "deny", "quotas"]))
            return 0
        if args.user_cmd == "remove":
            swept = admin.remove(args.name)
            print(f"removed user {args.name}: its connections are refused from now on"
                  + _swept(swept))
            return 0
        policy = Policy.parse(args.allow, args.deny)
        if args.user_cmd == "add":
            if not args.out:
                raise ConfigError("duomq auth user add needs --out FILE for the credentials")
            pair = KeyPair.new()
            login = _new_zk_login(args.name)
            creds = _credentials(args.name, pair, zk, cluster, login)
            swept = admin.add(User(args.name, pair.public, policy, _zk_id(login),
                                   tuple(sorted(quotas.parse(args.quota).items()))))
            creds.write(args.out)
            print(f"added user {args.name}; credentials in {args.out}" + _swept(swept))
            return 0
        old = admin.get(args.name)
        keys = KeyPair.new() if args.rotate else None
        if keys is not None and not args.out:
            raise ConfigError("--rotate needs --out FILE for the new credentials")
        if not args.allow and not args.deny:
            policy = old.policy                  # only the key or the quotas change
        # a new key comes with a new ZooKeeper login: the old one is revoked too
        login = _new_zk_login(args.name) if keys is not None else None
        rotated = _credentials(args.name, keys, zk, cluster, login) if keys is not None else None
        mine = dict(old.quotas)
        for text in args.quota:                 # KIND=N sets it, KIND= drops it
            kind, _, value = text.partition("=")
            if value == "" and kind in quotas.KINDS:
                mine.pop(kind, None)
            else:
                mine.update(quotas.parse([text]))
        swept = admin.update(User(args.name, keys.public if keys else old.public_key, policy,
                                  _zk_id(login) if keys is not None else old.zookeeper_id,
                                  tuple(sorted(mine.items()))))
        if rotated is not None:
            rotated.write(args.out)
        print(f"updated user {args.name}" + (f"; new credentials in {args.out}" if keys else "")
              + _swept(swept))
        return 0
    finally:
        zkutil.close(zk)

