"""A client told its view is stale (invalid_metadata) reads routes and
members from ZooKeeper at once, without waiting for its watches."""

import json

import pytest

from duomq.client import PullConsumer
from duomq.client.cluster.watches import ChildrenData
from duomq.common.errors import BadRequestError, NotMasterError, RequestTimeoutError

pytestmark = pytest.mark.integration


def test_refresh_reads_the_children_now(zk):
    zk.ensure_path("/refresh")
    zk.create("/refresh/b", b'{"x": 1}')
    seen = []
    nodes = ChildrenData(zk, json.loads, seen.append)
    nodes._paths["k"] = "/refresh"     # known, but no watch installed: only refresh can read it
    assert nodes.get("k") == {}
    nodes.refresh("k")
    assert nodes.get("k") == {"b": {"x": 1}} and seen == ["k"]
    zk.delete("/refresh/b")
    nodes.refresh("k")
    assert nodes.get("k") == {}
    nodes.refresh("unknown")           # nothing to read: no error, no change
    assert seen == ["k", "k"]
    nodes.close()


def test_a_second_watcher_of_a_key_waits_for_the_first_read_under_way(zk):
    """Two threads ask for the same group's members at once (CI: the CLI's
    consume found the group watched by another thread and read it empty,
    "no live broker"). The first read is held 0.5 s between reading the
    parent's children and their data, so the second caller arrives while it
    is under way: it waits for that read instead of returning an empty view.
    A listener that the first read runs and that asks for the same key (a
    route change reading the route) does not wait on itself."""
    import threading
    import time
    zk.ensure_path("/second")
    zk.create("/second/b", b'{"x": 1}')
    asked_inside = []

    class Held(ChildrenData):
        def _on_children(self, key, children):
            time.sleep(0.5)
            return super()._on_children(key, children)

    def listener(key):
        t0 = time.monotonic()
        nodes.watch(key, "/second")            # from inside the first read
        asked_inside.append(time.monotonic() - t0)
    nodes = Held(zk, json.loads, listener)
    first = threading.Thread(target=nodes.watch, args=("k", "/second"))
    first.start()
    time.sleep(0.1)                    # the first read is held now
    nodes.watch("k", "/second")
    assert nodes.get("k") == {"b": {"x": 1}}
    first.join()
    assert asked_inside and max(asked_inside) < 1.0, asked_inside
    nodes.close()


def test_after_failure_refreshes_only_when_the_view_is_stale(zk_hosts):
    with PullConsumer("g", zookeeper=zk_hosts, cluster="TestCluster") as c:
        calls = []
        c.routes.refresh = lambda topic: calls.append(("route", topic))
        c.members.refresh = lambda group: calls.append(("members", group))
        assert c.after_failure(RequestTimeoutError("slow"), "T", "broker-a") is True
        assert c.after_failure(BadRequestError("wrong"), "T", "broker-a") is False
        assert calls == []
        assert c.after_failure(NotMasterError("moved"), "T", "broker-a") is True
        assert calls == [("route", "T"), ("members", "broker-a")]


def test_a_route_snapshot_is_shared_until_the_route_changes(zk):
    """Every send reads the topic's route (issue 41: a snapshot per change,
    not per send). A change of any kind (a group's queues or address, a new
    group, a group gone, an unreadable node, a refresh that finds news) is
    seen on the next read, and a list a caller is given is its own."""
    from duomq.client.cluster.routes import RouteTable
    from duomq.coordinator.nodes import RouteNode
    from duomq.coordinator.paths import ZkPaths
    from duomq.testing.harness import wait_for

    paths = ZkPaths("SnapCluster")
    table = RouteTable(zk, "SnapCluster")
    zk.create(paths.route("T", "broker-a"), RouteNode("broker-a", "tcp://a:1", 2).to_bytes(),
              makepath=True)
    # the first read may come before the arrival is counted: a later one is stable
    wait_for(lambda: table.get("T") is table.get("T"), 5, "a stable snapshot")
    first = table.get("T")
    assert table.get("T") is first and len(first.groups) == 1, "unchanged: the same snapshot"
    queues = first.queues(writable=True)
    queues.clear()                                   # the caller's own list
    assert len(first.queues(writable=True)) == 2

    def changed(before, check):
        wait_for(lambda: table.get("T") is not before and check(table.get("T")), 5,
                 "the change seen")
        return table.get("T")

    zk.set(paths.route("T", "broker-a"), RouteNode("broker-a", "tcp://a:2", 3).to_bytes())
    r = changed(first, lambda r: r.address("broker-a") == "tcp://a:2")
    assert len(r.queues(writable=True)) == 3
    zk.create(paths.route("T", "broker-b"), RouteNode("broker-b", "tcp://b:1", 1).to_bytes())
    r = changed(r, lambda r: set(r.groups) == {"broker-a", "broker-b"})
    assert [q.broker_group for q in r.queues(writable=True)] == ["broker-a"] * 3 + ["broker-b"]
    zk.set(paths.route("T", "broker-b"), b"{not json")
    r = changed(r, lambda r: set(r.groups) == {"broker-a"} and "broker-b" in r.unreadable)
    zk.delete(paths.route("T", "broker-b"))
    zk.set(paths.route("T", "broker-a"), RouteNode("broker-a", "tcp://a:2", 3, perm=4).to_bytes())
    r = changed(r, lambda r: r.queues(writable=True) == [] and len(r.queues(readable=True)) == 3)
    # a refresh that finds the same: the snapshot stands; one that finds news: a new one
    table.refresh("T")
    assert table.get("T") is r
    zk.delete(paths.route("T", "broker-a"))
    table.refresh("T")
    assert table.get("T", wait_s=0).groups == {}
    table.close()
