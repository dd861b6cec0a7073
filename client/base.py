"""What producers and consumers share: a ZooKeeper session, the route table,
the remoting I/O thread and the timer thread (heartbeats, delayed and
periodic work)."""

from __future__ import annotations

import functools
import inspect
import logging
import os
import socket
import uuid
from collections.abc import Iterator
from typing import Any

from kazoo.exceptions import (
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NoAuthError,
    NoNodeError,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from prometheus_client.core import Metric

from duomq.auth.credentials import Credentials, resolve_credentials
from duomq.client.cluster.members import BrokerMembers
from duomq.client.cluster.routes import RouteTable, TopicRoute
from duomq.client.metrics import ClientCollector, ClientMetrics
from duomq.client.remoting import RemotingClient
from duomq.client.scheduler import Scheduler
from duomq.common.endpoint import resolve_endpoint
from duomq.common.errors import (
    AuthenticationError,
    AuthorizationError,
    ConfigError,
    NoRouteError,
    TopicNotExistError,
    UnusableRouteError,
    ZooKeeperRefusedError,
    ZooKeeperUnavailableError,
    for_status,
)
from duomq.common.metrics import serve
from duomq.common.names import validate_name
from duomq.coordinator import zk as zkutil
from duomq.coordinator.auth_nodes import UserNode
from duomq.coordinator.nodes import MemberNode, NodeError
from duomq.coordinator.paths import ZkPaths
from duomq.coordinator.zk_login import CREDENTIALS_ENV
from duomq.proto import pb

log = logging.getLogger(__name__)
HEARTBEAT_INTERVAL_S = 30.0


def _as_duomq_errors(fn):
    """``fn`` raising duomq errors only: kazoo's (a lost connection, an
    expired session, a refusal) become the duomq error that says so, with
    its retriable flag (``SessionExpiredError`` had escaped
    ``Producer.send`` at the heal of a ZooKeeper outage)."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (ConnectionLoss, SessionExpiredError, ConnectionClosedError,
                OperationTimeoutError, KazooTimeoutError) as exc:
            raise ZooKeeperUnavailableError(f"ZooKeeper did not answer ({type(exc).__name__}): "
                                            f"try again once it is back") from exc
        except NoAuthError as exc:
            raise AuthorizationError("ZooKeeper refused this client's read or write (its "
                                     "credentials may not do that)") from exc
        except KazooException as exc:
            raise ZooKeeperRefusedError(f"ZooKeeper refused: {type(exc).__name__} "
                                        f"{exc}".rstrip()) from exc
    return call


class ClientBase:
    """What producers and consumers share. Every public method of a client
    (this class's and its subclasses') raises duomq errors only
    (``_as_duomq_errors``, applied once per class)."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _wrap_public(cls)

    def __init__(self, zookeeper: str | None, cluster: str | None, *, zk=None):
        self.zookeeper, self.cluster = resolve_endpoint(zookeeper, cluster)
        validate_name("cluster", self.cluster)
        self.client_id = f"{socket.gethostname()}@{os.getpid()}@{uuid.uuid4().hex[:8]}"
        self.paths = ZkPaths(self.cluster)
        self._own_zk = zk is None
        cfg = getattr(self, "config", None)
        given = resolve_credentials(cfg.credentials if cfg is not None else None)
        self.zk = zk if zk is not None else zkutil.connect(
            self.zookeeper, access=given.zookeeper if given is not None else None,
            cluster=self.cluster)
        try:
            self.credentials = secured(self.zk, self.cluster, given)
        except Exception:
            if self._own_zk:
                zkutil.close(self.zk)
            raise
        self.routes = RouteTable(self.zk, self.cluster)
        self._leaders: dict[str, dict[str, str]] = {}   # topic -> group -> master address
        self.routes.add_listener(self._route_changed)
        self.members = BrokerMembers(self.zk, self.cluster)
        self.external = bool(getattr(cfg, "external", False)) or \
            os.environ.get("DUOMQ_EXTERNAL", "").strip().lower() in ("1", "true", "yes")
        self._undialled: set[str] = set()
        transport = getattr(cfg, "transport", "auto")    # (auto: $DUOMQ_TRANSPORT)
        if transport == "native" and self.credentials is not None:
            if self._own_zk:
                zkutil.close(self.zk)
            raise ConfigError("transport = \"native\": this cluster is secured and CURVE is "
                              "libzmq's; use \"auto\" or \"zeromq\"")
        self.remoting = RemotingClient(name=f"duomq-io-{type(self).__name__}",
                                       credentials=self.credentials, server_key=self._served_key,
                                       dial=self._dial if self.external else None,
                                       transport=transport,
                                       busy_poll_us=getattr(cfg, "busy_poll_us", 0))
        self._closed = False
        self.timer = Scheduler(f"duomq-timer-{type(self).__name__}")
        # RocketMQ clients also tell every broker who they are every 30 s
        self._heartbeat = self.timer.every(HEARTBEAT_INTERVAL_S, self.send_heartbeats, first_s=0)
        # metrics only when the user gives a metrics_port
        self.metrics: ClientMetrics | None = \
            ClientMetrics() if cfg is not None and cfg.metrics_port >= 0 else None
        self.metrics_url: str | None = None
        self._metrics_server: Any = None
        if self.metrics is not None:
            self._serve_metrics(cfg)

    def _serve_metrics(self, cfg) -> None:
        """Start ``/metrics`` on the configured ``metrics_port``; a port that
        cannot be bound closes the client and raises ConfigError. (A scrape
        may come before a subclass's ``__init__`` ends: ``metric_families``
        reads only what exists.)"""
        try:
            self._metrics_server, port = serve(ClientCollector(self), cfg.metrics_host,
                                               cfg.metrics_port)
        except ConfigError:
            self.close()
            raise
        host = "127.0.0.1" if cfg.metrics_host in ("", "0.0.0.0") else cfg.metrics_host
        self.metrics_url = f"http://{host}:{port}/metrics"
        log.info("client metrics on %s", self.metrics_url)

    def metric_families(self) -> Iterator[Metric]:
        """Families read from this client's state at a scrape (a subclass's)."""
        return iter(())

    def heartbeat_groups(self) -> tuple[list[str], list[str]]:
        """(producer groups, consumer groups) this client announces."""
        return [], []

    def registered_brokers(self) -> list[MemberNode]:
        """Every broker's member node in the cluster."""
        try:
            groups = self.zk.get_children(self.paths.brokers)
        except NoNodeError:
            return []
        return [m for g in sorted(groups)
                for m in zkutil.read_members(self.zk, self.paths, g).values()]

    def send_heartbeats(self) -> None:
        producers, consumers = self.heartbeat_groups()
        req = pb.HeartbeatRequest(client_id=self.client_id, producer_groups=producers,
                                  consumer_groups=consumers)
        for b in self.registered_brokers():
            if b.address:
                self.remoting.request(b.address, pb.HEARTBEAT, req, 5)

    def zk_connected(self) -> None:
        """ZooKeeperUnavailableError now unless the session is connected: a
        read while it is not would wait for the connection, without end."""
        if not self.zk.connected:
            raise ZooKeeperUnavailableError("ZooKeeper is not connected: try again once it is "
                                            "back")

    def route(self, topic: str, wait_s: float = 3.0) -> TopicRoute:
        """The topic's live route; raises TopicNotExistError or NoRouteError."""
        route = self.routes.get(topic, wait_s=wait_s)
        if not route.groups:
            if route.unreadable:            # nothing to wait for: the node says what is wrong
                group, why = sorted(route.unreadable.items())[0]
                raise UnusableRouteError(f"topic {topic!r} has no usable route: its route on "
                                         f"broker group {group} is unreadable ({why})")
            self.zk_connected()
            if not self.zk.exists(self.paths.topic(topic)):
                raise TopicNotExistError(f"topic {topic!r} does not exist in cluster "
                                         f"{self.cluster!r}")
            raise NoRouteError(f"no live broker group serves topic {topic!r}")
        return route

    def _route_changed(self, topic: str) -> None:
        """A topic's route changed (kazoo's thread): requests in flight to a
        master that no longer leads its group fail now (``abort``), not at
        their timeout; ``leader_changed`` hears of each group that moved."""
        groups = self.routes.get(topic, wait_s=0).groups
        now = {g: r.address for g, r in groups.items()}
        before = self._leaders.get(topic, {})
        self._leaders[topic] = now
        for group, address in before.items():
            if now.get(group) != address:
                successor = now.get(group)
                why = (f"{address} no longer leads broker group {group!r}"
                       + (f" ({successor} does)" if successor else " (no master now)"))
                self.remoting.abort(address, why)
                self.leader_changed(group)

    def _served_key(self, address: str) -> bytes:
        """The broker key ``address`` serves with (its member node), for a
        client that trusts more than one (a broker key rotation)."""
        return self.members.served_key(address, self._groups_led_from(address))

    def _groups_led_from(self, address: str) -> set[str]:
        """The groups whose master is at ``address``, as the routes say."""
        return {g for leaders in list(self._leaders.values())
                for g, a in leaders.items() if a == address}

    def _dial(self, address: str) -> str:
        """An external client dials the external address the broker
        registers (``external_host``); a broker without one, at its own
        address, said once."""
        external = self.members.external_of(address, self._groups_led_from(address))
        if not external and address not in self._undialled:
            self._undialled.add(address)
            log.warning("the broker at %s registers no external address (its external_host "
                        "is unset): dialling %s itself", address, address)
        return external or address

    def leader_changed(self, group: str) -> None:
        """A broker group's master changed or vanished (kazoo's thread)."""

    def after_failure(self, exc: BaseException, topic: str | None = None,
                      group: str | None = None) -> bool:
        """What every retry site does with a failed request: when the error
        says the client's view is stale (``invalid_metadata``: not master,
        no such topic, no route), read the topic's route and the group's
        members again now; then whether the request may be retried
        (``retriable``)."""
        if getattr(exc, "invalid_metadata", False):
            if topic:
                self.routes.refresh(topic)
            if group:
                self.members.refresh(group)
        return bool(getattr(exc, "retriable", False))

    def master_address(self, group: str, topic: str | None = None) -> str:
        """The live master of a broker group (its member node, else a route)."""
        for member in self.members.of(group).values():
            if member.is_master and member.address:
                return member.address
        addr = self.routes.get(topic, wait_s=0).address(group) if topic else None
        if addr is None:
            raise NoRouteError(f"broker group {group!r} has no live master")
        return addr

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
            self._metrics_server.server_close()
        self._heartbeat.cancel()
        self.timer.close()
        self.remoting.close()
        self.routes.close()
        self.members.close()
        if self._own_zk:
            zkutil.close(self.zk)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def secured(zk, cluster: str, credentials: Credentials | None) -> Credentials | None:
    """The credentials a client's sockets use: None on a cluster without
    auth; on a secured one (its brokers publish that in ZooKeeper) the
    user's, checked now so that missing, foreign, removed or replaced
    credentials fail at once with AuthenticationError, not after a timeout."""
    paths = ZkPaths(cluster)
    config = zkutil.auth_config(zk, cluster)
    if not config.enabled:
        return None
    if credentials is None:
        raise AuthenticationError(
            f"cluster {cluster!r} is secured (auth = true): credentials are needed: pass "
            f"credentials=PATH (CLI: --credentials PATH or ${CREDENTIALS_ENV}), a file "
            f"written by `duomq auth user add`")
    who = f"credentials of user {credentials.user!r}"
    # the key the brokers serve with now (the last one started says)
    if config.broker_public_key not in {k.decode() for k in credentials.broker_keys}:
        raise AuthenticationError(f"{who} were refused: they do not trust the key cluster "
                                  f"{cluster!r}'s brokers serve with (another cluster's "
                                  f"credentials, or the broker key was rotated since: "
                                  f"`duomq auth trust` takes the new one)")
    try:
        user = UserNode.from_bytes(zk.get(paths.auth_user(credentials.user))[0])
    except NodeError:
        raise AuthenticationError(f"{who} were refused: user {credentials.user!r}'s node in "
                                  f"cluster {cluster!r} cannot be read") from None
    except NoNodeError:
        raise AuthenticationError(f"{who} were refused: no such user in cluster "
                                  f"{cluster!r} (removed?)") from None
    except NoAuthError:
        raise AuthenticationError(_refused_by_zookeeper(who, credentials)) from None
    if user.public_key != credentials.keys.public.decode():
        raise AuthenticationError(f"{who} were refused: the user has another key now "
                                  f"(rotated with `duomq auth user update --rotate`)")
    try:
        zk.get_children(paths.brokers)
    except NoAuthError:
        raise AuthenticationError(_refused_by_zookeeper(who, credentials)) from None
    return credentials


def _refused_by_zookeeper(who: str, credentials: Credentials) -> str:
    if not credentials.zookeeper:
        return f"{who} were refused by ZooKeeper: they carry no ZooKeeper login"
    return (f"{who} were refused by ZooKeeper: their ZooKeeper login is not the user's (any "
            f"more): the user was removed, or its key and login were rotated with `duomq auth "
            f"user update --rotate`")


def raise_for(status: int, error: str) -> None:
    if status != pb.OK:
        raise for_status(status, error)


def _wrap_public(cls) -> None:
    """Wrap the public functions ``cls`` defines itself (not dunders,
    properties or those already wrapped by a base)."""
    for name, value in list(vars(cls).items()):
        if name.startswith("_") or not inspect.isfunction(value) \
                or getattr(value, "__wrapped__", None) is not None:
            continue                 # (staticmethods, classmethods, properties: left as they are)
        setattr(cls, name, _as_duomq_errors(value))


_wrap_public(ClientBase)
