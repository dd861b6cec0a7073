"""The proxy's pure parts: protocol messages as duomq's, routes as queues."""

from __future__ import annotations

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from duomq.common import errors
from duomq.coordinator.topics import PERM_READ, PERM_WRITE
from duomq.proxy import convert, routes
from duomq.proxy.protocol import d


def test_a_delivery_time_in_seconds_or_in_the_python_clients_milliseconds():
    assert convert.delivery_ms(Timestamp(seconds=1_790_000_000, nanos=250_000_000)) == \
        1_790_000_000_250
    # rocketmq-python-client 5.1.2 writes milliseconds into seconds
    assert convert.delivery_ms(Timestamp(seconds=1_790_000_000_250)) == 1_790_000_000_250


def test_a_message_keeps_its_id_group_tag_keys_and_properties():
    m = d.Message(body=b"b")
    m.topic.name = "T"
    sp = m.system_properties
    sp.message_id, sp.message_group, sp.tag = "ID1", "g", "TagA"
    sp.keys.extend(["k1", "k2"])
    m.user_properties["a"] = "1"
    out = convert.outgoing(m)
    assert (out.message_id, out.group) == ("ID1", "g")
    assert out.message.tags == "TagA" and out.message.keys == "k1 k2"
    assert out.message.properties == {"a": "1", "UNIQ_KEY": "ID1", "__SHARDINGKEY": "g"}
    assert out.message.deliver_at_ms == 0


def test_errors_map_to_the_protocols_codes():
    assert convert.error_code(errors.TopicNotExistError("x")) == d.TOPIC_NOT_FOUND
    assert convert.error_code(errors.AuthorizationError("x")) == d.FORBIDDEN
    assert convert.error_code(errors.BadRequestError("beyond timer_max_delay_ms")) == \
        d.ILLEGAL_DELIVERY_TIME
    assert convert.error_code(RuntimeError("?")) == d.INTERNAL_SERVER_ERROR
    assert convert.SEND_CODES == {"SEND_OK": d.OK, "FLUSH_DISK_TIMEOUT":
                                  d.MASTER_PERSISTENCE_TIMEOUT, "FLUSH_SLAVE_TIMEOUT":
                                  d.SLAVE_PERSISTENCE_TIMEOUT, "SLAVE_NOT_AVAILABLE":
                                  d.HA_NOT_AVAILABLE}


@pytest.mark.parametrize("host,scheme", [("10.0.0.1", d.IPv4), ("::1", d.IPv6),
                                         ("[::1]", d.IPv6), ("proxy.svc", d.DOMAIN_NAME)])
def test_an_endpoints_scheme_is_filled_in(host, scheme):
    asked = d.Endpoints()
    asked.addresses.add(host=host, port=8081)
    assert routes.endpoints(asked, ("own", 1)).scheme == scheme
    assert routes.endpoints(None, ("own", 1)).addresses[0].host == "own"


def test_permissions_and_queues_of_a_route():
    class R:
        def __init__(self, perm, queues):
            self.perm, self.queues = perm, queues
    where = routes.endpoints(None, ("p", 8081))
    qs = routes.message_queues("T", "", {"b": R(PERM_READ, 1), "a": R(PERM_READ | PERM_WRITE, 2)},
                               where)
    assert [(q.broker.name, q.id, q.permission) for q in qs] == [
        ("a", 0, d.READ_WRITE), ("a", 1, d.READ_WRITE), ("b", 0, d.READ)]
    assert routes.permission(PERM_WRITE) == d.WRITE and routes.permission(0) == d.NONE


@pytest.mark.parametrize("name", ["UNIQ_KEY", "__SHARDINGKEY", "DELAY", "DELIVER_AT", "TRAN_MSG",
                                  "PGROUP", "REAL_TOPIC", "RECALL_OF", "TIMER_ORIGIN"])
def test_a_user_property_with_a_system_name_is_refused(name):
    m = d.Message(body=b"b")
    m.topic.name = "T"
    m.user_properties[name] = "1"
    with pytest.raises(convert.ConvertError, match="reserved") as e:
        convert.outgoing(m)
    assert e.value.code == d.ILLEGAL_MESSAGE_PROPERTY_KEY
