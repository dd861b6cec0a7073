"""The producer's batch encoding: the inline fast path gives exactly the bytes
of ``record.encode_record``, which the broker's ``scan_batch`` accepts."""

import array

import pytest

from duomq.client.producer.producer import encode_batch
from duomq.common.errors import MessageTooLargeError
from duomq.common.message import Message
from duomq.format import record as rec

HOST = rec.pack_host("10.1.2.3", 4567)
pytestmark = pytest.mark.usefixtures("hot_loops")   # each test with the C encoder and without


def reference(msgs, now):
    return b"".join(rec.encode_record(m.topic.encode(), m.tags.encode(), m.keys.encode(),
                                      rec.encode_properties(m.wire_properties()), bytes(m.body), now,
                                      HOST) for m in msgs)


def test_plain_and_full_messages_encode_like_encode_record():
    msgs = [Message("T", b"plain"), Message("T", bytearray(b"from a bytearray")),
            Message("T", memoryview(array.array("i", [1, 2, 3]))),   # 12 bytes, 3 items
            Message("T", b"tagged", tags="TagA"), Message("T", b"", keys=["k1", "k2"]),
            Message("T", b"both", tags="T\u00e4g", keys="k\u00e9 k2"),
            Message("T", "text body", properties={"a": "1"}), Message("T", b"last")]
    data, scheduled = encode_batch(msgs, "T", 1234, HOST, 1 << 20)
    assert data == reference(msgs, 1234)
    assert not scheduled
    assert encode_batch(msgs + [Message("T", b"later", delay_level=2)], "T", 1, HOST, 1 << 20)[1]
    bounds, borns, hashes, _keyed = rec.scan_batch(bytearray(data), b"T", 1 << 20, len(msgs))
    assert borns == [1234] * len(msgs)
    assert hashes[3] == rec.tag_hash(b"TagA") and hashes[0] == 0
    assert bounds[3] - bounds[2] == rec.HEADER_SIZE + 1 + 12


def test_plain_messages_of_repeated_and_large_lengths_encode_like_encode_record():
    """Plain records share a header middle and, per body length, its tail."""
    msgs = [Message("Topic", bytes([i]) * n) for i, n in
            enumerate([3, 3, 0, 70_000, 3, 0, 70_000, 1])]
    for born in (0, 1_700_000_000_000):
        data, _ = encode_batch(msgs, "Topic", born, HOST, 1 << 20)
        assert data == reference(msgs, born)
    rec.scan_batch(bytearray(data), b"Topic", 1 << 20, len(msgs))


def test_one_topic_per_batch_and_size_limit():
    with pytest.raises(ValueError, match="one topic"):
        encode_batch([Message("T", b"a"), Message("U", b"b")], "T", 1, HOST, 1 << 20)
    limit = rec.HEADER_SIZE + 1 + 10
    encode_batch([Message("T", b"x" * 10)], "T", 1, HOST, limit)
    for m in (Message("T", b"x" * 11), Message("T", b"x" * 10, tags="t")):
        with pytest.raises(MessageTooLargeError, match="exceeds max_message_bytes"):
            encode_batch([m], "T", 1, HOST, limit)


def test_message_normalises_body_and_keys_and_refuses_other_types():
    m = Message("T", "héllo", keys=["a", "b"])
    assert (m.body, m.keys, m.properties) == ("héllo".encode(), "a b", {})
    assert Message("T", b"x") == Message("T", b"x") and Message("T", b"x") != Message("T", b"y")
    with pytest.raises(TypeError, match="body must be bytes"):
        Message("T", 42)
    with pytest.raises(TypeError, match="keys must be"):
        Message("T", b"x", keys=7)


def test_a_numbered_batch_is_encoded_once_with_its_numbering_in_the_first_record():
    """An idempotent batch: the first record carries the numbering and
    FLAG_SEQUENCED, the others are as a plain batch has them; the broker
    reads the numbering back (``common.idempotence.sequence_of``)."""
    from duomq.common.idempotence import sequence_of, sequencing
    msgs = [Message("T", b"one", tags="A", properties={"x": "1"}), Message("T", b"two"),
            Message("T", b"three", keys="k")]
    numbering = sequencing(77, 5, len(msgs))
    data, scheduled = encode_batch(msgs, "T", 1234, HOST, 1 << 20, numbering)
    first = Message("T", b"one", tags="A", properties={"x": "1", **numbering})
    head = rec.encode_record(b"T", b"A", b"", rec.encode_properties(first.properties), b"one",
                             1234, HOST, rec.FLAG_SEQUENCED)
    assert not scheduled and data == head + reference(msgs[1:], 1234)
    assert msgs[0].properties == {"x": "1"}              # the caller's message is untouched
    h = rec.Header(*rec.HEADER.unpack_from(data, 0))
    at = rec.HEADER_SIZE + h.topic_len + h.tags_len + h.keys_len
    assert sequence_of(rec.decode_properties(data[at:at + h.props_len])) == (77, 5, 3)
    plain = Message("T", b"p")
    assert rec.fields("flags").unpack_from(
        encode_batch([plain], "T", 1, HOST, 1 << 20, sequencing(1, 0, 1))[0], 0)[0] == \
        rec.FLAG_SEQUENCED


def test_a_delayed_batch_is_never_numbered():
    from duomq.common.idempotence import sequencing
    msgs = [Message("T", b"now"), Message("T", b"later", delay_level=2)]
    data, scheduled = encode_batch(msgs, "T", 1, HOST, 1 << 20, sequencing(1, 0, 2))
    assert scheduled and data == encode_batch(msgs, "T", 1, HOST, 1 << 20)[0]
    assert not rec.fields("flags").unpack_from(data, 0)[0] & rec.FLAG_SEQUENCED


def test_a_batch_of_timers_delays_and_halves_encodes_like_encode_record_unnumbered():
    """The batches the broker routes (timers above all: any time, many at a
    time) take the C loop too, to the same bytes as the Python, unnumbered."""
    from duomq.common.idempotence import sequencing
    msgs = [Message("T", b"t%d" % i, tags="a", keys="k", deliver_at_ms=10 ** 12 + i)
            for i in range(5)] + [Message("T", b"lvl", delay_level=3),
                                  Message("T", b"half", properties={"TRAN_MSG": "true"}),
                                  Message("T", b"plain")]
    for numbering in (None, sequencing(7, 3, len(msgs))):
        data, scheduled = encode_batch(msgs, "T", 99, HOST, 1 << 20, numbering)
        assert scheduled and data == reference(msgs, 99)
        assert not rec.fields("flags").unpack_from(data, 0)[0] & rec.FLAG_SEQUENCED


def test_a_timers_time_is_its_last_property_on_the_wire():
    """``deliver_at_ms`` is an attribute (no dict made per timer) sent as the
    property DELIVER_AT after the others; one set in properties after the
    message was made gives way to it (sent once); one that is not a time
    goes to the broker as given (which refuses it)."""
    from duomq.client.producer.producer import encode_numbered
    msgs = [Message("T", b"a", delay_ms=60_000), Message("T", b"b", deliver_at_ms=10 ** 12,
                                                        properties={"x": "1", "y": "2"})]
    mutated = Message("T", b"c", deliver_at_ms=10 ** 12 + 1)
    mutated.properties["DELIVER_AT"] = "5"
    odd = Message("T", b"d", deliver_at_ms=10 ** 12)
    odd.deliver_at_ms = "soon"                                       # type: ignore[assignment]
    for batch in (msgs, msgs + [mutated], [odd]):
        data, scheduled = encode_numbered(batch, "T", 5, HOST, 1 << 20, 9, 1)
        assert scheduled and data == reference(batch, 5)
    props = rec.decode_properties(rec.encode_properties(msgs[1].wire_properties()))
    assert list(props) == ["x", "y", "DELIVER_AT"] and msgs[1].properties == {"x": "1", "y": "2"}
    assert mutated.wire_properties()["DELIVER_AT"] == str(10 ** 12 + 1)
