"""A group's route node against a deposed master (issue 68's random drill:
a master cut off ZooKeeper past its session came back on a new one, its
topic watches fired again before its controller stepped it down, and it
replaced its successor's route with its own; the step-down, or its death
a round later, took that node along and the group had no route: producers
acked nothing for 68 s, until the next election). Real ZooKeeper, real
session expiry, the interleaving forced."""

from __future__ import annotations

import threading
import time

import pytest
from kazoo.client import KazooClient, KazooState

from duomq.common.config import BrokerConfig
from duomq.controller.registry import BrokerRegistry
from duomq.coordinator import zk as zkutil
from duomq.coordinator.nodes import MasterNode, MemberNode, RouteNode
from duomq.coordinator.paths import ZkPaths
from duomq.coordinator.topics import TopicConfig

pytestmark = pytest.mark.integration
CLUSTER, GROUP, TOPIC = "routes", "g", "Orders"


def wait_for(cond, timeout_s: float = 10.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def route(zk) -> tuple[RouteNode, int] | None:
    stat = zk.exists(ZkPaths(CLUSTER).route(TOPIC, GROUP))
    if stat is None:
        return None
    raw, stat = zk.get(ZkPaths(CLUSTER).route(TOPIC, GROUP))
    return RouteNode.from_bytes(raw), stat.ephemeralOwner


class Broker:
    """A registry of broker ``broker_id`` on its own ZooKeeper session."""

    def __init__(self, hosts: str, broker_id: int):
        self.zk = zkutil.connect(hosts)
        cfg = BrokerConfig(cluster=CLUSTER, group=GROUP, broker_id=broker_id,
                           port=10000 + broker_id)
        self.registry = BrokerRegistry(self.zk, cfg, lambda: MemberNode(broker_id, 0))
        self.registry.register()
        wait_for(lambda: TOPIC in self.registry.topics, what="the topic watch")
        self.address = cfg.address

    def session(self) -> int:
        return self.zk.client_id[0]

    def expire(self, hosts: str) -> None:
        """End this broker's session on the server, as a partition past the
        session timeout does: another client takes the session and closes it."""
        sid, password = self.zk.client_id
        other = KazooClient(hosts=hosts, client_id=(sid, password))
        other.start(timeout=10)
        other.stop()
        other.close()

    def close(self) -> None:
        self.registry.close(master=True)
        zkutil.close(self.zk)


@pytest.fixture
def brokers(zk, zk_hosts):
    zk.create(ZkPaths(CLUSTER).topic(TOPIC), TopicConfig(TOPIC, {GROUP: 4}).to_bytes(),
              makepath=True)
    made: list[Broker] = []
    yield lambda broker_id: made.append(Broker(zk_hosts, broker_id)) or made[-1]
    for b in made:
        try:
            b.close()
        except Exception:
            pass


def test_a_deposed_master_back_on_a_new_session_leaves_its_successors_route(zk, zk_hosts,
                                                                          brokers):
    old, new = brokers(0), brokers(1)
    old.registry.publish_routes(5)
    assert route(zk)[0].broker_id == 0
    states: list[str] = []
    old.zk.add_listener(lambda s: states.append(s) or None)
    # the old master's topic watch fires again on its new session: held
    # (its registry lock) until the successor has published, so that it
    # runs in the window between the new session and the step-down
    old.registry._lock.acquire()
    released = False
    try:
        old.expire(zk_hosts)
        wait_for(lambda: KazooState.LOST in states, what="the old master's session to be lost")
        wait_for(lambda: states[-1] == KazooState.CONNECTED, what="its new session")
        wait_for(lambda: route(zk) is None, what="its route to go with its old session")
        new.registry.publish_routes(6)
        assert route(zk) == (route(zk)[0], new.session())
        old.registry._lock.release()
        released = True
        time.sleep(1.0)             # the re-fired watch runs now
        node, owner = route(zk)
        assert (node.broker_id, node.epoch, node.address, owner) == \
            (1, 6, new.address, new.session())
        # the deposed master steps down, then dies: the route stays
        old.registry.remove_routes()
        old.close()
        time.sleep(0.5)
        node, owner = route(zk)
        assert (node.broker_id, node.epoch, owner) == (1, 6, new.session())
    finally:
        if not released:
            old.registry._lock.release()


def test_a_master_that_does_not_know_it_was_deposed_does_not_take_the_route_back(zk, brokers):
    """Its route watch is armed when the successor replaces its route: the
    replacement is one transaction (a delete, then a create, left a window
    in which that watch wrote the old route back: seen in a suite run), and
    the watch repairs only a route of the master the master node names."""
    for _ in range(5):
        old, new = brokers(0), brokers(1)
        name_master(zk, old, 0, 5)
        old.registry.publish_routes(5)
        name_master(zk, new, 1, 6)
        new.registry.publish_routes(6)    # the successor replaces an older epoch's route
        time.sleep(0.2)                   # the old master's watch has fired
        node, owner = route(zk)
        assert (node.broker_id, node.epoch, owner) == (1, 6, new.session())
        old.close()
        new.close()
        zk.delete(ZkPaths(CLUSTER).master(GROUP))
    old, new = brokers(0), brokers(1)
    old.registry.publish_routes(5)
    name_master(zk, new, 1, 6)
    new.registry.publish_routes(6)
    old.registry.set_acks_now(False)      # still believes it leads epoch 5: republishes
    node, owner = route(zk)
    assert (node.broker_id, node.epoch, node.acks, owner) == (1, 6, True, new.session())
    assert old.registry.routes_epoch == 5   # (it learns from its controller, not here)


def name_master(zk, broker: Broker, broker_id: int, epoch: int) -> None:
    """The group's master node names ``broker_id`` at ``epoch`` (as a claim writes it)."""
    path = ZkPaths(CLUSTER).master(GROUP)
    data = MasterNode(broker_id, epoch, broker.address, "tcp://127.0.0.1:1").to_bytes()
    if zk.exists(path):
        zk.set(path, data)
    else:
        zk.create(path, data, makepath=True)
    wait_for(lambda: broker.registry.master is not None
             and (broker.registry.master.broker_id, broker.registry.master.epoch)
             == (broker_id, epoch), what="the master node's watch")


def test_a_masters_route_removed_behind_its_back_is_published_again(zk, brokers):
    master = brokers(1)
    name_master(zk, master, 1, 6)
    master.registry.publish_routes(6)
    for _ in range(3):                    # every time, not once: the watch is set again
        zk.delete(ZkPaths(CLUSTER).route(TOPIC, GROUP))
        wait_for(lambda: route(zk) is not None, 5.0, "the route to be published again")
        node, owner = route(zk)
        assert (node.broker_id, node.epoch, owner) == (1, 6, master.session())
    master.registry.set_acks_now(False)   # its own writes do not loop through the watch
    time.sleep(0.5)
    before = zk.exists(ZkPaths(CLUSTER).route(TOPIC, GROUP)).version
    time.sleep(0.5)
    assert zk.exists(ZkPaths(CLUSTER).route(TOPIC, GROUP)).version == before
    master.registry.remove_routes()       # stepped down: not published again
    time.sleep(0.5)
    assert route(zk) is None


def test_a_master_restarted_after_kill_9_takes_back_its_own_route(zk, zk_hosts, brokers):
    """The route of this broker's dead session (at its epoch) is replaced at
    once, not left to vanish with that session and take the live one along."""
    first = brokers(1)
    first.registry.publish_routes(6)
    dead_session = first.session()
    first.registry._closed = True          # as kill -9: nothing removed, the session lingers
    again = brokers(1)
    again.registry.publish_routes(6)
    node, owner = route(zk)
    assert owner == again.session() != dead_session
    zkutil.close(first.zk)                 # the dead session ends
    time.sleep(0.5)
    assert route(zk)[1] == again.session()


def test_routes_are_not_published_on_a_lost_session(zk, zk_hosts, brokers):
    master = brokers(0)
    master.registry.publish_routes(5)
    lost = threading.Event()
    master.zk.add_listener(lambda s: lost.set() if s == KazooState.LOST else None)
    master.expire(zk_hosts)
    assert lost.wait(10)
    assert master.registry.routes_epoch is None
    wait_for(lambda: master.zk.state == KazooState.CONNECTED, what="a new session")
    time.sleep(1.0)       # the topic watches fire again on the new session
    assert route(zk) is None
