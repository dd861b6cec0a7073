"""The offset-reset document published for a group's live members (pure)."""

import pytest

from duomq.common.message import MessageQueue
from duomq.coordinator import offset_reset


def test_encode_decode_roundtrip_and_fresh_ids():
    offsets = {MessageQueue("T", "broker-a", 0): 10, MessageQueue("T", "broker-b", 3): 0}
    doc = offset_reset.encode("T", offsets, 1234)
    assert doc["offsets"] == {"broker-a/0": 10, "broker-b/3": 0} and doc["timestamp_ms"] == 1234
    rid, back = offset_reset.decode(doc)
    assert rid == doc["id"] and back == offsets
    assert offset_reset.encode("T", offsets, 1234)["id"] != rid


def test_group_names_with_slashes_do_not_exist_but_queue_ids_must_be_numbers():
    rid, back = offset_reset.decode({"id": "x", "topic": "T", "offsets": {"g-1/2": "7"}})
    assert back == {MessageQueue("T", "g-1", 2): 7}


@pytest.mark.parametrize("doc", [{}, {"id": "x", "topic": "T"}, {"id": "x", "topic": "T",
                                 "offsets": {"g/zero": 1}}, {"id": "x", "topic": "T",
                                 "offsets": []}])
def test_malformed_documents_are_refused(doc):
    with pytest.raises(ValueError, match="not an offset reset"):
        offset_reset.decode(doc)
