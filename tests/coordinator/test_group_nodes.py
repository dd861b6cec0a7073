"""The consumer groups' and the secured cluster's znodes (pure)."""

import json

import pytest

from duomq.common.message import MessageQueue
from duomq.coordinator.auth_nodes import AdminsNode, AuthConfigNode, UserNode
from duomq.coordinator.group_nodes import (
    GroupAccessNode,
    GroupMemberNode,
    OffsetResetNode,
    QueueOwnerNode,
)
from duomq.coordinator.nodes import NodeError


def test_an_offset_reset_reads_back_with_a_fresh_id_each():
    offsets = {MessageQueue("T", "broker-a", 0): 10, MessageQueue("T", "broker-b", 3): 0}
    node = OffsetResetNode("T", offsets, 1234)
    doc = json.loads(node.to_bytes())
    assert doc["offsets"] == {"broker-a/0": 10, "broker-b/3": 0} and doc["timestamp_ms"] == 1234
    assert OffsetResetNode.from_bytes(node.to_bytes()) == node
    assert OffsetResetNode("T", offsets, 1234).id != node.id


@pytest.mark.parametrize(("raw", "message"), [
    (b"{}", "offset reset node: 'topic' is missing"),
    (b'{"id": "x", "topic": "T"}', "'offsets' is None, not an object"),
    (b'{"id": "x", "topic": "T", "offsets": {"g/zero": 1}}', "'g/zero': 1 is not"),
    (b'{"id": "x", "topic": "T", "offsets": {"g/1": "7"}}', "'g/1': '7' is not"),
    (b'{"id": "x", "topic": "T", "offsets": []}', "'offsets' is [], not an object"),
    (b'{"topic": "T", "offsets": {}}', "'id' is missing"),
])
def test_a_malformed_offset_reset_is_refused(raw, message):
    with pytest.raises(NodeError) as exc:
        OffsetResetNode.from_bytes(raw)
    assert message in str(exc.value)


def test_group_member_owner_auth_and_user_nodes_read_back():
    for node in (GroupMemberNode("T", "BROADCASTING"), GroupMemberNode("T")):
        assert GroupMemberNode.from_bytes(node.to_bytes()) == node
    assert QueueOwnerNode.from_bytes(QueueOwnerNode("host@1@ab").to_bytes()).client_id == \
        "host@1@ab"
    assert QueueOwnerNode.from_bytes(b"\xff" * 5000).client_id == "\ufffd" * 1024   # bounded
    config = AuthConfigNode(True, "k1", ("k1", "k2"))
    assert AuthConfigNode.from_bytes(config.to_bytes()) == config
    assert AuthConfigNode(True, "k1").accepted_keys == ("k1",)
    assert AuthConfigNode.from_bytes(b"") == AuthConfigNode()
    user = UserNode("key", ("Topic:T:Pub",), ("Topic:T:Sub",))
    assert UserNode.from_bytes(user.to_bytes()) == user


@pytest.mark.parametrize(("parse", "raw", "message"), [
    (GroupMemberNode.from_bytes, b'{"model": "X"}', "group member node: 'topic' is missing"),
    (AuthConfigNode.from_bytes, b'{"enabled": "yes"}', "'enabled' is 'yes', not true or false"),
    (AuthConfigNode.from_bytes, b'{"broker_public_keys": "k"}', "'broker_public_keys' is 'k', "
                                                                "not a list of strings"),
    (UserNode.from_bytes, b'{"allow": [1]}', "user node: 'allow' is [1], not a list of strings"),
    (GroupAccessNode.from_bytes, b'{"readers": ["no-colon"]}',
     "group access node: 'readers' is ['no-colon'], not a list of digest ids"),
    (AdminsNode.from_bytes, b'{"retired": [7]}', "admins node: 'retired' is [7], not a list of "
                                                 "digest ids"),
])
def test_malformed_group_and_auth_nodes_are_refused(parse, raw, message):
    with pytest.raises(NodeError) as exc:
        parse(raw)
    assert message in str(exc.value)
