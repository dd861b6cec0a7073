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


def test_after_failure_refreshes_only_when_the_view_is_stale(zk_hosts):
    with PullConsumer(zk_hosts, "TestCluster", group="g") as c:
        calls = []
        c.routes.refresh = lambda topic: calls.append(("route", topic))
        c.members.refresh = lambda group: calls.append(("members", group))
        assert c.after_failure(RequestTimeoutError("slow"), "T", "broker-a") is True
        assert c.after_failure(BadRequestError("wrong"), "T", "broker-a") is False
        assert calls == []
        assert c.after_failure(NotMasterError("moved"), "T", "broker-a") is True
        assert calls == [("route", "T"), ("members", "broker-a")]
