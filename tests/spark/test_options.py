"""Spark source options and offset planning (pure)."""

import pytest

from duomq.client.cluster.members import read_candidates, read_target
from duomq.client.spark.fetch import DataLossError, ReadTask, _data_loss
from duomq.client.spark.options import (
    Range,
    SourceOptions,
    cap_by_limit,
    flatten,
    nest,
    parse_offsets,
    plan_ranges,
)
from duomq.common.errors import ConfigError
from duomq.common.role import Role
from duomq.coordinator.nodes import MemberNode


def test_defaults_follow_spark_kafka():
    batch = SourceOptions.parse({"topic": "A, B"}, streaming=False)
    assert batch.topics == ("A", "B") and batch.starting == "earliest" and batch.ending == "latest"
    assert batch.read_from == "slave_preferred" and batch.fail_on_data_loss
    assert batch.max_replica_lag_ms == 0
    assert SourceOptions.parse({"topic": "A"}, streaming=True).starting == "latest"
    assert batch.subscription == "*"
    assert SourceOptions.parse({"topic": "A", "subscription": "B ||A"},
                               streaming=False).subscription == "A || B"


@pytest.mark.parametrize("options, error", [
    ({}, "exactly one of the options topic"),
    ({"topic": "A", "readFrom": "leader"}, "readFrom"),
    ({"topic": "A", "failOnDataLoss": "maybe"}, "failOnDataLoss"),
    ({"topic": "A", "maxOffsetsPerTrigger": "0"}, "below 1"),
    ({"topic": "A", "startingOffsets": "{nope"}, "JSON"),
    ({"topic": "A", "startingOffsets": '{"A": 3}'}, "look like"),
    ({"topic": "A", "endingOffsets": "earliest"}, "cannot be earliest"),
    ({"topic": "A", "startingTimestamp": "20", "endingTimestamp": "10"}, "before"),
    ({"topic": "A", "kafka.bootstrap.servers": "x"}, "unknown duomq source option"),
    ({"topic": "A", "subscribe": "A"}, "got topic, subscribe"),
    ({"topic": "A", "subscription": "TagA || "}, "subscription"),
    ({"topic": "A", "subscription": "* || TagA"}, "subscription"),
])
def test_bad_options_are_refused_clearly(options, error):
    with pytest.raises(ConfigError, match=error):
        SourceOptions.parse(options, streaming=False)


def test_stream_only_and_batch_only_options():
    with pytest.raises(ConfigError, match="batch queries only"):
        SourceOptions.parse({"topic": "A", "endingOffsets": "latest"}, streaming=True)


def test_offsets_json_roundtrip():
    flat = parse_offsets("x", '{"A": {"g1": {"0": 5, "1": -2}}, "B": {"g2": {"3": -1}}}')
    assert flat == {("A", "g1", 0): 5, ("A", "g1", 1): -2, ("B", "g2", 3): -1}
    assert flatten(nest(flat)) == flat


def test_plan_ranges_splits_and_starts_new_queues_at_zero():
    start = {("A", "g", 0): 10}
    end = {("A", "g", 0): 35, ("A", "g", 1): 5, ("A", "g", 2): 0}
    assert plan_ranges(start, end, 10) == [
        Range("A", "g", 0, 10, 20), Range("A", "g", 0, 20, 30), Range("A", "g", 0, 30, 35),
        Range("A", "g", 1, 0, 5)]


def test_cap_by_limit_is_proportional_and_exact():
    start = {("A", "g", 0): 0, ("A", "g", 1): 100, ("A", "g", 2): 7}
    latest = {("A", "g", 0): 900, ("A", "g", 1): 200, ("A", "g", 2): 7}
    capped = cap_by_limit(start, latest, 100)
    moved = {k: capped[k] - start[k] for k in start}
    assert sum(moved.values()) == 100 and moved[("A", "g", 0)] == 90
    assert moved[("A", "g", 2)] == 0
    assert cap_by_limit(start, latest, 10_000) == latest


def test_read_candidates_order_by_read_from():
    members = {0: MemberNode(0, role=Role.MASTER, address="m"),
               1: MemberNode(1, role=Role.SLAVE, address="s1", max_offset=5),
               2: MemberNode(2, role=Role.SLAVE, address="s2", max_offset=9),
               3: MemberNode(3, role=Role.SLAVE)}              # no address: not alive
    assert [m.address for m in read_candidates(members, "slave")] == ["s2", "s1"]
    assert [m.address for m in read_candidates(members, "slave_preferred")] == \
        ["s2", "s1", "m"]
    assert [m.address for m in read_candidates(members, "master")] == ["m", "s2", "s1"]
    # a slave that was too far behind a moment ago: after the master, or last
    assert [m.address for m in read_candidates(members, "slave_preferred",
                                                  frozenset({2}))] == ["s1", "m", "s2"]
    assert [m.address for m in read_candidates(members, "slave", frozenset({2}))] == \
        ["s1", "s2"]
    assert read_target({0: members[0]}, "slave") is None       # never the master
    assert read_target(members, "master", advice=1).address == "s1"
    assert read_target(members, "master", advice=3).address == "m"
    assert read_target({}, "slave") is None


def test_data_loss_fails_or_skips_to_the_first_kept_offset():
    def task(fail):
        return ReadTask("A", "g", 0, 3, 50, [], "zk", "c", "slave", fail, 1024, "grp")
    with pytest.raises(DataLossError, match=r"A@g#0: offsets 3..9 were deleted by retention"):
        _data_loss(task(True), 3, 10)
    assert _data_loss(task(False), 3, 10) == 10
    assert _data_loss(task(False), 3, 80) == 50          # the whole range is gone


def test_sink_totals_rows_per_topic_over_tasks():
    from duomq.client.spark.sink import SinkCommit, sent
    assert sent([SinkCommit({"A": 3, "B": 1}), None, SinkCommit({"A": 2})]) == {"A": 5, "B": 1}
