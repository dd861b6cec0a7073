import pytest

from duomq.common.role import Role
from duomq.coordinator.nodes import (
    EpochNode,
    IsrNode,
    MasterNode,
    MemberNode,
    NodeError,
    RouteNode,
    SwitchoverNode,
)
from duomq.coordinator.topics import TopicConfig


def test_nodes_read_back_what_they_write():
    m = MasterNode(1, 3, "127.0.0.1:10911", "127.0.0.1:10912")
    assert MasterNode.from_bytes(m.to_bytes()) == m
    isr = IsrNode(3, 1, frozenset({1, 2}))
    assert IsrNode.from_bytes(isr.to_bytes()) == isr
    e = EpochNode(3, 1, 4096)
    assert EpochNode.from_bytes(3, e.to_bytes()) == e
    for sw in (SwitchoverNode(0, 2, 1.5), SwitchoverNode(0, None, 2.0), SwitchoverNode()):
        assert SwitchoverNode.from_bytes(sw.to_bytes()) == sw


def test_a_member_node_is_typed_and_its_name_wins():
    raw = (b'{"broker_id": 9, "max_offset": 10, "epoch": 2, "role": "MASTER", '
           b'"address": "a:1", "pid": 77, "unknown_later_field": [1]}')
    m = MemberNode.from_bytes(raw, 4)
    assert (m.broker_id, m.max_offset, m.epoch, m.role, m.address) == (4, 10, 2, "MASTER", "a:1")
    assert m.role is Role.MASTER and m.is_master
    assert m.pid == 77 and not m.stepping_down and m.promotable
    assert MemberNode.from_bytes(b"", 5) == MemberNode(5)


def test_member_and_route_nodes_read_back_what_they_write():
    m = MemberNode(2, max_offset=7, epoch=3, role=Role.SLAVE, address="tcp://h:1", group="g",
                   ha_address="tcp://h:2", flush="SYNC_FLUSH", replication="SYNC",
                   max_ack_wait_ms=5000, pid=9, version="1.0", data_dir="/d",
                   confirmed_offset=6, auth=True, public_key="k", metrics="http://h:3/metrics",
                   recovery="cut", master_max_offset=8, lag_bytes=1, lag_ms=4,
                   replication_halted="why")
    assert MemberNode.from_bytes(m.to_bytes()) == m
    assert MemberNode.from_bytes(m.to_bytes(), 5).broker_id == 5
    r = RouteNode("broker-a", "tcp://h:1", 8, 4, 3, 1, 5000, 1 << 20, False)
    assert RouteNode.from_bytes(r.to_bytes()) == r


@pytest.mark.parametrize(("parse", "raw", "message"), [
    (MasterNode.from_bytes, b"not json", "master node: data is not JSON"),
    (MasterNode.from_bytes, b"[1]", "master node: data is a JSON list, not an object"),
    (MasterNode.from_bytes, b'{"epoch": 1}', "master node: 'broker_id' is missing"),
    (MasterNode.from_bytes, b'{"broker_id": "1"}', "master node: 'broker_id' is '1', not an "
                                                    "integer"),
    (lambda r: MemberNode.from_bytes(r, 1), b'{"max_offset": "x"}',
     "member node: 'max_offset' is 'x', not an integer"),
    (lambda r: MemberNode.from_bytes(r, 1), b'{"promotable": "yes"}',
     "member node: 'promotable' is 'yes', not true or false"),
    (lambda r: MemberNode.from_bytes(r, 1), b'{"role": "LEADER"}',
     "member node: 'role' is 'LEADER', not MASTER or SLAVE"),
    (lambda r: MemberNode.from_bytes(r, 1), b'{"address": 5}',
     "member node: 'address' is 5, not a string"),
    (IsrNode.from_bytes, b'{"members": [1, "x"]}',
     "isr node: 'members' is [1, 'x'], not a list of broker ids"),
    (IsrNode.from_bytes, b'{"members": [true]}',
     "isr node: 'members' is [True], not a list of broker ids"),
    (lambda r: EpochNode.from_bytes(2, r), b'{"start_offset": 1.5}',
     "epoch node: 'start_offset' is 1.5, not an integer"),
    (SwitchoverNode.from_bytes, b'{"from": "0"}', "switchover node: 'from' is '0', not a broker id"),
])
def test_a_malformed_node_is_refused_with_its_kind_and_field(parse, raw, message):
    with pytest.raises(NodeError) as exc:
        parse(raw)
    assert str(exc.value) == message


def test_a_route_reads_back_and_defaults_to_read_write():
    r = RouteNode.from_bytes(b'{"group": "broker-a", "address": "tcp://h:1", "queues": 8, '
                             b'"epoch": 3}')
    assert (r.group, r.address, r.queues, r.perm, r.epoch) == ("broker-a", "tcp://h:1", 8, 6, 3)


@pytest.mark.parametrize(("raw", "message"), [
    (b'{"group": "g", "address": "a", "queues": 30000000}',
     "route node: 'queues' is 30000000, outside 1..1024"),
    (b'{"group": "g", "address": "a", "queues": 0}', "route node: 'queues' is 0, outside 1..1024"),
    (b'{"group": "g", "address": "a", "queues": "8"}', "route node: 'queues' is '8', not an integer"),
    (b'{"group": "g", "queues": 8}', "route node: 'address' is missing"),
    (b'{"group": "g", "address": "a", "queues": 8, "perm": 9}',
     "route node: 'perm' is 9, outside 0..7"),
    (b'{"group": "g", "address": "a", "queues": 8, "acks": "no"}',
     "route node: 'acks' is 'no', not true or false"),
])
def test_a_malformed_route_is_refused(raw, message):
    with pytest.raises(NodeError) as exc:
        RouteNode.from_bytes(raw)
    assert str(exc.value) == message


@pytest.mark.parametrize(("raw", "message"), [
    (b'{"queues": {"broker-a": "x"}}', "queue count 'x' of group 'broker-a' is not 1..1024"),
    (b'{"queues": {"broker-a": 30000000}}', "queue count 30000000 of group 'broker-a'"),
    (b'{"queues": {"../x": 4}}', "'../x' is not a broker group name"),
    (b'{"queues": [4]}', "'queues' is [4], not an object"),
    (b'{"queues": {"g": 4}, "perm": "rw"}', "perm 'rw' or order False is invalid"),
    (b"\xff", "topic node: data is not JSON"),
])
def test_a_malformed_topic_node_is_refused(raw, message):
    with pytest.raises(NodeError, match=message.replace("[", r"\[").replace("]", r"\]")
                       .replace(".", r"\.")):
        TopicConfig.from_bytes("T", raw)
    assert TopicConfig.from_bytes("T", b'{"queues": {"g": 4}}').queues == {"g": 4}
