"""Connecting to ZooKeeper, the cluster's auth config, and reading a group's member nodes."""

from __future__ import annotations

import logging
import socket
import ssl

from kazoo.client import KazooClient
from kazoo.exceptions import (
    AuthFailedError,
    ConnectionLoss,
    NoAuthError,
    NoNodeError,
    SASLException,
    SessionClosedRequireSaslError,
)
from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.retry import KazooRetry
from kazoo.security import ACL, make_digest_acl

from duomq.common import endpoint
from duomq.common.errors import AuthenticationError, ServiceNotAvailableError
from duomq.common.zk_tls import ca_file
from duomq.coordinator.auth_nodes import AuthConfigNode
from duomq.coordinator.nodes import MemberNode, NodeError
from duomq.coordinator.paths import ZkPaths
from duomq.coordinator.zk_login import SASL_FILE_ENV, ZK_ADMIN, env_zk_access, env_zk_sasl

log = logging.getLogger(__name__)


FROM_ENV = object()


class DeadLinkHandler(SequentialThreadingHandler):
    """kazoo's threading handler, its connections with ``TCP_USER_TIMEOUT``.
    kazoo finds a dead connection only by a ping left unanswered, and pings
    only after half its read timeout without sending a request: a client
    that keeps sending (a master renewing its lease every 0.3 s, a slave
    reading the master node as often) never pings, and a connection cut
    without a reset (a partition) stayed "connected" for 107 s in a drill,
    until a retransmission after the heal met the server's reset. With
    ``TCP_USER_TIMEOUT`` the kernel closes a connection whose data goes
    unacknowledged that long, and kazoo reconnects (the same session, when
    it is still alive). A server that is slow or paused but reachable still
    acknowledges at the TCP level: only a lost link trips it."""

    def __init__(self, user_timeout_ms: int):
        super().__init__()
        self.user_timeout_ms = max(1, int(user_timeout_ms))

    def create_connection(self, *args, **kwargs):
        sock = super().create_connection(*args, **kwargs)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, self.user_timeout_ms)
        except (OSError, AttributeError):     # not Linux: kazoo's pings alone
            log.debug("TCP_USER_TIMEOUT not available on this platform")
        return sock


def dead_link_ms(session_timeout_ms: int) -> int:
    """How long a ZooKeeper connection's data may go unacknowledged before
    it is closed: a third of the session, leaving two thirds to reconnect
    (to another server of the ensemble) before the session ends."""
    return session_timeout_ms // 3


def node_acl(access: dict) -> list[ACL]:
    """What a node created with ``access`` carries unless its creator says
    otherwise: the ``duomq`` principal (brokers, admins) every right, until
    the cluster's ACL is known (``connect`` with a cluster, a broker's
    sweeps); a user's client reading and writing, no more: it makes nodes
    only in its groups' containers, with ``zk_acls.made_node_acl``."""
    user, password = access["digest"].split(":", 1)
    if user == ZK_ADMIN:
        return [make_digest_acl(user, password, all=True)]
    return [make_digest_acl(user, password, read=True, write=True)]


def connect(hosts: str, *, timeout_s: float | None = None, session_timeout_ms: int = 10_000,
            read_only: bool = False, access=FROM_ENV,
            cluster: str | None = None, sasl=FROM_ENV) -> KazooClient:
    """A started KazooClient (``hosts`` may carry a chroot: ``h:p,h2:p/chroot``).
    ``access``: a secured cluster's ZooKeeper digest (``Credentials.zookeeper``;
    by default ``$DUOMQ_CREDENTIALS``'s), with the ACL new nodes carry.
    ``cluster``: the cluster this session works on; when it is not secured,
    the nodes the session creates stay open whatever ``access`` says (its
    brokers, without credentials, must be able to change them).
    ``timeout_s``: how long to wait for a connection (default
    ``endpoint.connect_timeout_s``: 10 s, 2.5 s in the CLI).
    ``sasl``: a SASL (DIGEST-MD5) login ``user:password`` to an ensemble
    that asks for one; by default ``access``'s, else the one in the file
    ``$DUOMQ_ZOOKEEPER_SASL_FILE`` names. A refused login, or a missing
    one the ensemble requires, is an AuthenticationError at once."""
    if timeout_s is None:
        timeout_s = endpoint.connect_timeout_s
    if access is FROM_ENV:
        access = env_zk_access()
    if sasl is FROM_ENV:
        sasl = (access or {}).get("sasl") or env_zk_sasl()
    zk = KazooClient(
        hosts=hosts, timeout=session_timeout_ms / 1000,
        handler=DeadLinkHandler(dead_link_ms(session_timeout_ms)),
        # reconnect attempts at most 0.25 s apart: after an outage (an ensemble
        # electing its leader) a master must be back within its slaves' lease
        # count (master_lease_ms), which starts when they are back
        connection_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=0.25),
        command_retry=KazooRetry(max_tries=5, delay=0.1, backoff=2, max_delay=2),
        read_only=read_only,
        # an ensemble that speaks only TLS: verified with the cluster's CA,
        # and the name (or address) each server is reached by in its certificate
        use_ssl=bool(access and access.get("tls_ca")),
        ca=ca_file(access["tls_ca"]) if access and access.get("tls_ca") else None,
        check_hostname=bool(access and access.get("tls_ca")),
        auth_data=[("digest", access["digest"])] if access else None,
        default_acl=node_acl(access) if access else None,
        sasl_options=sasl_options(sasl) if sasl else None,
    )
    try:
        zk.start(timeout=timeout_s)
    except Exception as exc:
        zk.close()
        tls = " over TLS" if access and access.get("tls_ca") else \
            " (an ensemble that speaks only TLS needs credentials carrying its CA)"
        raise ServiceNotAvailableError(
            f"cannot reach ZooKeeper at {hosts}{tls} within {timeout_s:g} s: {exc}") from None
    _admitted(zk, hosts, sasl)
    if access and cluster is not None:
        if not cluster_secured(zk, cluster):
            zk.default_acl = None
        elif access["digest"].startswith(ZK_ADMIN + ":"):
            # an admin's nodes carry the cluster's ACL (its users read them),
            # which its root carries (the brokers' sweeps keep it so)
            try:
                zk.default_acl = zk.get_acls(ZkPaths(cluster).cluster_root)[0]
            except (NoNodeError, NoAuthError):
                pass
    return zk


def _refused_login_stops_the_session() -> None:
    """kazoo 2.11.0 lets a server's refusal of a SASL login (a wrong
    password: SessionClosedRequireSaslError) escape its connection thread,
    which dies with a traceback and leaves the client hanging
    (python-zk/kazoo#594). Its fix (python-zk/kazoo#810, merged after
    2.11.0) treats it as a failed authentication: the session stops with
    AUTH_FAILED. The same, until a release carries it."""
    from kazoo.protocol.connection import ConnectionHandler
    original = ConnectionHandler._authenticate_with_sasl
    if getattr(original, "refusal_stops", False):
        return

    def authenticate(self, host, timeout):
        try:
            return original(self, host, timeout)
        except (SessionClosedRequireSaslError, SASLException) as exc:
            raise AuthFailedError(f"SASL login refused ({type(exc).__name__})") from exc

    authenticate.refusal_stops = True       # type: ignore[attr-defined]
    ConnectionHandler._authenticate_with_sasl = authenticate


_refused_login_stops_the_session()


def sasl_options(login: str) -> dict:
    user, _, password = login.partition(":")
    return {"mechanism": "DIGEST-MD5", "username": user, "password": password}


def _admitted(zk: KazooClient, hosts: str, sasl: str | None) -> None:
    """One request, so that an ensemble refusing the session says so now:
    kazoo connects before it logs in, and an ensemble that requires SASL
    answers the first request of a session without a login."""
    try:
        zk.exists("/")
        return
    except SessionClosedRequireSaslError:
        why = (f"ZooKeeper at {hosts} requires a SASL login, and none was given: put "
               f"'user:password' in a file named by ${SASL_FILE_ENV} (a broker: "
               f"zookeeper_sasl_file, or auth_dir/zookeeper.sasl), or in the credentials' "
               f"zookeeper.sasl")
    except (AuthFailedError, ConnectionLoss) as exc:
        if not sasl:
            raise
        why = (f"ZooKeeper at {hosts} refused the SASL login of {sasl.partition(':')[0]!r} "
               f"(DIGEST-MD5): a wrong password, a user its JAAS Server section does not "
               f"list, or an ensemble not configured for SASL ({type(exc).__name__})")
    close(zk)
    raise AuthenticationError(why)


def auth_config(zk: KazooClient, cluster: str) -> AuthConfigNode:
    """What the cluster's brokers published of their security (an absent
    node: not secured; one that cannot be parsed: secured, keys unknown, so
    that nobody falls back to plaintext on a damaged node)."""
    try:
        return AuthConfigNode.from_bytes(zk.get(ZkPaths(cluster).auth_config)[0])
    except NoNodeError:
        return AuthConfigNode()
    except NodeError as exc:
        log.warning("unreadable auth config node: %s", exc)
        return AuthConfigNode(enabled=True)


def cluster_secured(zk: KazooClient, cluster: str) -> bool:
    """Whether the cluster's brokers published that auth is on."""
    return auth_config(zk, cluster).enabled



def read_members(zk: KazooClient, paths: ZkPaths, group: str) -> dict[int, MemberNode]:
    """A broker group's live members by id, read now; a node that cannot be
    parsed is left out, with a warning."""
    try:
        names = zk.get_children(paths.members(group))
    except NoNodeError:
        return {}
    members = {}
    for name in sorted((n for n in names if n.isdigit()), key=int):
        member = read_member(zk, paths, group, int(name))
        if member is not None:
            members[member.broker_id] = member
    return members


def read_member(zk: KazooClient, paths: ZkPaths, group: str, broker_id: int) -> MemberNode | None:
    """One broker's member node, or None (absent, or unreadable: logged)."""
    path = paths.member(group, broker_id)
    try:
        return MemberNode.from_bytes(zk.get(path)[0], broker_id)
    except NoNodeError:
        return None
    except NodeError as exc:
        log.warning("unreadable member node %s ignored: %s", path, exc)
        return None


def close(zk: KazooClient | None) -> None:
    if zk is None:
        return
    try:
        zk.stop()
    finally:
        zk.close()


def four_letter(host: str, port: int, word: str = "srvr", timeout: float = 1.0,
                tls_ca: str | None = None) -> str:
    """A ZooKeeper four-letter command's answer (the server must whitelist
    it); ``tls_ca``: the CA (PEM) of a server that speaks only TLS."""
    with socket.create_connection((host, port), timeout=timeout) as raw:
        s = raw
        if tls_ca is not None:
            # as a session: the CA's chain, and the name dialled in the certificate
            s = ssl.create_default_context(cadata=tls_ca).wrap_socket(raw, server_hostname=host)
        try:
            s.sendall(word.encode())
            chunks = []
            while True:
                try:
                    data = s.recv(4096)
                except ssl.SSLEOFError:      # a TLS server that closes without close_notify
                    break
                if not data:
                    break
                chunks.append(data)
        finally:
            s.close()
    return b"".join(chunks).decode(errors="replace")


def server_mode(host: str, port: int, tls_ca: str | None = None) -> str:
    """leader, follower, standalone, or "" (down, or not in a quorum);
    ``tls_ca``: as for ``four_letter``."""
    try:
        out = four_letter(host, port, "srvr", tls_ca=tls_ca)
    except OSError:
        return ""
    return next((line.split(":", 1)[1].strip() for line in out.splitlines()
                 if line.startswith("Mode:")), "")
