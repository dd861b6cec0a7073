import itertools

import pytest

from duomq.client.consumer.allocate import (
    STRATEGIES,
    allocate_averagely,
    allocate_by_circle,
    allocate_consistent_hash,
    strategy,
)
from duomq.client.producer.selector import RoundRobinSelector, select_by_key
from duomq.common.client_config import ConsumerConfig
from duomq.common.config import ALLOCATE_STRATEGIES
from duomq.common.errors import ConfigError
from duomq.common.message import MessageQueue


def qs(n, groups=("a", "b")):
    return [MessageQueue("T", g, i) for g in groups for i in range(n)]


@pytest.mark.parametrize("nq,nm", list(itertools.product([1, 3, 8, 16], [1, 2, 3, 5, 8, 20])))
def test_every_queue_exactly_once_and_balanced(nq, nm):
    queues = qs(nq, groups=("a",))
    members = [f"c{i}" for i in range(nm)]
    shares = [allocate_averagely(queues, members, m) for m in members]
    flat = [q for s in shares for q in s]
    assert sorted(flat) == sorted(queues)
    sizes = [len(s) for s in shares]
    assert max(sizes) - min(sizes) <= 1


def test_same_answer_whatever_the_input_order():
    queues = qs(4)
    members = ["z", "a", "m"]
    assert allocate_averagely(queues, members, "m") == \
        allocate_averagely(list(reversed(queues)), sorted(members), "m")


def test_ranges_are_contiguous_like_rocketmq():
    queues = qs(8, groups=("a",))
    assert [q.queue_id for q in allocate_averagely(queues, ["c1", "c2", "c3"], "c1")] == [0, 1, 2]
    assert [q.queue_id for q in allocate_averagely(queues, ["c1", "c2", "c3"], "c3")] == [6, 7]


def test_non_member_gets_nothing():
    assert allocate_averagely(qs(4), ["a"], "b") == []


def test_round_robin_skips_failed_groups_and_key_hash_is_stable():
    sel = RoundRobinSelector()
    queues = qs(2)
    picks = {sel.select(queues, {"a"}).broker_group for _ in range(10)}
    assert picks == {"b"}
    assert sel.select(queues, {"a", "b"}) in queues  # everything failed: still pick one
    assert select_by_key(queues, "order-42") == select_by_key(list(queues), "order-42")


def test_fault_avoidance_expires():
    from duomq.client.producer.selector import FaultAvoidance
    f = FaultAvoidance(5.0)
    f.failed("a", now=100.0)
    assert f.avoided(101.0) == {"a"}
    assert f.avoided(105.5) == set()


@pytest.mark.parametrize("name", ALLOCATE_STRATEGIES)
@pytest.mark.parametrize("nq,nm", [(1, 1), (3, 2), (8, 3), (16, 5), (4, 8)])
def test_every_strategy_gives_each_queue_to_exactly_one_member(name, nq, nm):
    queues = qs(nq)
    members = [f"c{i}" for i in range(nm)]
    shares = [strategy(name)(list(reversed(queues)), members, m) for m in members]
    assert sorted(q for s in shares for q in s) == sorted(queues)
    assert strategy(name)(queues, members, "stranger") == []


def test_circle_deals_queues_out_one_at_a_time():
    queues = qs(4)                                       # a0..a3, b0..b3
    got = allocate_by_circle(queues, ["c2", "c1"], "c1")
    assert [(q.broker_group, q.queue_id) for q in got] == [("a", 0), ("a", 2), ("b", 0), ("b", 2)]


def test_consistent_hash_moves_queues_only_to_a_newcomer():
    queues = qs(32)
    before = {m: set(allocate_consistent_hash(queues, ["c1", "c2", "c3"], m))
              for m in ("c1", "c2", "c3")}
    after = {m: set(allocate_consistent_hash(queues, ["c1", "c2", "c3", "c4"], m))
             for m in ("c1", "c2", "c3", "c4")}
    for m in ("c1", "c2", "c3"):
        assert after[m] <= before[m], f"{m} gained queues when c4 joined"
    moved = sum(len(before[m] - after[m]) for m in before)
    assert moved == len(after["c4"]) and 0 < moved < len(queues) / 2


def test_strategies_by_name_or_function():
    assert set(STRATEGIES) == set(ALLOCATE_STRATEGIES)
    mine = strategy(lambda queues, members, me: queues[:1])
    assert mine(qs(2), ["x"], "x") == [qs(2)[0]]
    with pytest.raises(ConfigError, match="allocate_strategy"):
        strategy("random")
    with pytest.raises(ConfigError, match="allocate_strategy"):
        ConsumerConfig(allocate_strategy="random")
    with pytest.raises(ConfigError, match="rebalance_interval_ms"):
        ConsumerConfig(rebalance_interval_ms=0)
