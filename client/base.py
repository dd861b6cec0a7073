"""What producers and consumers share: a ZooKeeper session, the route table,
and the remoting I/O thread."""

from __future__ import annotations

import os
import socket
import uuid

from kazoo.exceptions import NoNodeError

from duomq.common.errors import NoRouteError, TopicNotExistError, for_status
from duomq.common.message import MessageQueue
from duomq.common.names import validate_name
from duomq.coordinator import zk as zkutil
from duomq.coordinator.paths import ZkPaths
from duomq.coordinator.routes import RouteTable, TopicRoute
from duomq.client.remoting import RemotingClient
from duomq.proto import pb

DEFAULT_ZOOKEEPER = "127.0.0.1:2181"
DEFAULT_CLUSTER = "DefaultCluster"


def resolve_endpoint(zookeeper: str | None, cluster: str | None) -> tuple[str, str]:
    """Explicit values, then DUOMQ_ZOOKEEPER / DUOMQ_CLUSTER, then the defaults."""
    return (zookeeper or os.environ.get("DUOMQ_ZOOKEEPER") or DEFAULT_ZOOKEEPER,
            cluster or os.environ.get("DUOMQ_CLUSTER") or DEFAULT_CLUSTER)


class ClientBase:
    def __init__(self, zookeeper: str | None, cluster: str | None, *, zk=None):
        self.zookeeper, self.cluster = resolve_endpoint(zookeeper, cluster)
        validate_name("cluster", self.cluster)
        self.client_id = f"{socket.gethostname()}@{os.getpid()}@{uuid.uuid4().hex[:8]}"
        self.paths = ZkPaths(self.cluster)
        self._own_zk = zk is None
        self.zk = zk if zk is not None else zkutil.connect(self.zookeeper)
        self.routes = RouteTable(self.zk, self.cluster)
        self.remoting = RemotingClient(name=f"duomq-io-{type(self).__name__}")
        self._closed = False

    def route(self, topic: str, wait_s: float = 3.0) -> TopicRoute:
        """The topic's live route; raises TopicNotExistError or NoRouteError."""
        route = self.routes.get(topic, wait_s=wait_s)
        if not route.groups:
            if not self.zk.exists(self.paths.topic(topic)):
                raise TopicNotExistError(f"topic {topic!r} does not exist in cluster "
                                         f"{self.cluster!r}")
            raise NoRouteError(f"no live broker group serves topic {topic!r}")
        return route

    def address_of(self, mq: MessageQueue) -> str:
        addr = self.routes.get(mq.topic, wait_s=0).address(mq.broker_group)
        if addr is None:
            raise NoRouteError(f"broker group {mq.broker_group!r} is not serving {mq.topic!r}")
        return addr

    def call(self, mq: MessageQueue, type_: int, message, timeout_s: float):
        """A blocking request to the queue's broker; raises on error statuses
        other than the ones the caller handles (returned as (status, error, resp))."""
        return self.remoting.call(self.address_of(mq), type_, message, timeout_s)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.remoting.close()
        self.routes.close()
        if self._own_zk:
            zkutil.close(self.zk)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def raise_for(status: int, error: str) -> None:
    if status != pb.OK:
        raise for_status(status, error)
