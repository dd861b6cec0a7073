"""Every RPC of MessagingService against the proxy, through the generated
stub (what any client's calls come down to): malformed and out of order,
each answers a clear status and the proxy goes on serving."""

from __future__ import annotations

import socket
import uuid

import grpc
import pytest

from duomq.proxy.protocol import d, rpc, s

META = (("x-mq-client-id", "probe-client"),)


@pytest.fixture(scope="module")
def stub(proxied):
    _cluster, proxy = proxied
    channel = grpc.insecure_channel(proxy.address)
    yield rpc.MessagingServiceStub(channel)
    channel.close()


def message(topic, body=b"x", **props):
    m = d.Message(body=body)
    m.topic.name = topic
    m.system_properties.message_id = uuid.uuid4().hex
    m.system_properties.message_type = d.NORMAL
    m.user_properties.update(props)
    return m


NOT_YET = [("ForwardMessageToDeadLetterQueue", s.ForwardMessageToDeadLetterQueueRequest()),
           ("SyncLiteSubscription", s.SyncLiteSubscriptionRequest())]


def test_the_proxy_answers_every_rpc_of_the_service_itself():
    """None falls through to the generated servicer's default (a bare
    UNIMPLEMENTED gRPC error, no status the client can read)."""
    from duomq.proxy.service import MessagingService
    names = [m.name for m in s.DESCRIPTOR.services_by_name["MessagingService"].methods]
    assert len(names) == 17
    assert [n for n in names if n not in vars(MessagingService)] == []


@pytest.mark.parametrize("name,request_", NOT_YET, ids=[n for n, _ in NOT_YET])
def test_an_rpc_not_served_yet_says_so_by_name(stub, name, request_):
    r = getattr(stub, name)(request_, metadata=META, timeout=5)
    assert r.status.code == d.NOT_IMPLEMENTED and name in r.status.message


def queue(topic, qid=0, broker="broker-a"):
    mq = d.MessageQueue(id=qid)
    mq.topic.name, mq.broker.name = topic, broker
    return mq


def test_offsets_pull_and_commit_through_the_proxy(stub, topic):
    msgs = [message(topic, b"o%d" % i) for i in range(3)]
    r = stub.SendMessage(s.SendMessageRequest(messages=msgs), metadata=META, timeout=5)
    qid = None
    for mq_id in range(4):          # the batch went to one queue: find it by its bounds
        end = stub.QueryOffset(s.QueryOffsetRequest(message_queue=queue(topic, mq_id),
                                                    query_offset_policy=d.END), timeout=5)
        if end.offset == 3:
            qid = mq_id
    assert r.status.code == d.OK and qid is not None
    begin = stub.QueryOffset(s.QueryOffsetRequest(message_queue=queue(topic, qid),
                                                  query_offset_policy=d.BEGINNING), timeout=5)
    assert begin.status.code == d.OK and begin.offset == 0
    group = d.Resource(name="pullers")
    got = list(stub.PullMessage(s.PullMessageRequest(group=group, message_queue=queue(topic, qid),
                                                     offset=1, batch_size=10), timeout=5))
    assert [x.message.body for x in got if x.HasField("message")] == [b"o1", b"o2"]
    assert [x.next_offset for x in got if x.WhichOneof("content") == "next_offset"] == [3]
    assert got[-1].status.code == d.OK
    none = stub.GetOffset(s.GetOffsetRequest(group=group, message_queue=queue(topic, qid)),
                          timeout=5)
    assert none.status.code == d.OFFSET_NOT_FOUND
    assert stub.UpdateOffset(s.UpdateOffsetRequest(group=group, message_queue=queue(topic, qid),
                                                   offset=2), timeout=5).status.code == d.OK
    assert stub.GetOffset(s.GetOffsetRequest(group=group, message_queue=queue(topic, qid)),
                          timeout=5).offset == 2
    bad = {
        "negative": stub.UpdateOffset(s.UpdateOffsetRequest(group=group, offset=-1,
                                                            message_queue=queue(topic, qid)),
                                      timeout=5),
        "no group": stub.GetOffset(s.GetOffsetRequest(message_queue=queue(topic, qid)),
                                   timeout=5),
        "bad queue": stub.GetOffset(s.GetOffsetRequest(group=group,
                                                       message_queue=queue(topic, -1)), timeout=5),
        "bad broker": stub.QueryOffset(s.QueryOffsetRequest(
            message_queue=queue(topic, 0, "no/such")), timeout=5),
        "past the end": list(stub.PullMessage(s.PullMessageRequest(
            group=group, message_queue=queue(topic, qid), offset=99), timeout=5))[-1],
    }
    assert {k: d.Code.Name(v.status.code) for k, v in bad.items()} == {
        "negative": "ILLEGAL_OFFSET", "no group": "ILLEGAL_CONSUMER_GROUP",
        "bad queue": "BAD_REQUEST", "bad broker": "BAD_REQUEST", "past the end": "ILLEGAL_OFFSET"}


def test_routes_name_the_endpoint_the_client_dialled_with_its_scheme(stub, proxied, topic):
    _cluster, proxy = proxied
    req = s.QueryRouteRequest()
    req.topic.name = topic
    req.endpoints.addresses.add(host="127.0.0.1", port=proxy.port)      # no scheme given
    r = stub.QueryRoute(req, metadata=META, timeout=5)
    assert r.status.code == d.OK and [q.id for q in r.message_queues] == [0, 1, 2, 3]
    q = r.message_queues[0]
    assert q.permission == d.READ_WRITE and q.broker.name == "broker-a" and q.broker.id == 0
    assert q.broker.endpoints.scheme == d.IPv4
    assert [(a.host, a.port) for a in q.broker.endpoints.addresses] == [("127.0.0.1", proxy.port)]
    assert set(q.accept_message_types) == {d.NORMAL, d.FIFO, d.DELAY, d.TRANSACTION}


def test_bad_routes_and_sends_get_the_protocols_codes_and_nothing_is_stored(stub, topic,
                                                                            proxied):
    bad = {}
    bad["no topic"] = stub.QueryRoute(s.QueryRouteRequest(), metadata=META, timeout=5)
    req = s.QueryRouteRequest()
    req.topic.name = "NoSuchTopic"
    bad["unknown topic"] = stub.QueryRoute(req, metadata=META, timeout=5)
    send = stub.SendMessage
    bad["no message"] = send(s.SendMessageRequest(), metadata=META, timeout=5)
    bad["empty body"] = send(s.SendMessageRequest(messages=[message(topic, b"")]),
                             metadata=META, timeout=5)
    bad["two topics"] = send(s.SendMessageRequest(messages=[message(topic), message("Other")]),
                             metadata=META, timeout=5)
    bad["reserved"] = send(s.SendMessageRequest(messages=[message(topic, UNIQ_KEY="forged")]),
                           metadata=META, timeout=5)
    gz = message(topic)
    gz.system_properties.body_encoding = d.GZIP
    bad["gzip"] = send(s.SendMessageRequest(messages=[gz]), metadata=META, timeout=5)
    fifo_timer = message(topic)
    fifo_timer.system_properties.message_type = d.FIFO
    fifo_timer.system_properties.delivery_timestamp.seconds = 4_000_000_000
    bad["fifo timer"] = send(s.SendMessageRequest(messages=[fifo_timer]), metadata=META,
                             timeout=5)
    far = message(topic)
    far.system_properties.delivery_timestamp.seconds = 4_000_000_000        # year 2096
    bad["too far"] = send(s.SendMessageRequest(messages=[far]), metadata=META, timeout=5)
    bad["unknown topic send"] = send(s.SendMessageRequest(messages=[message("NoSuchTopic")]),
                                     metadata=META, timeout=5)
    assert {k: d.Code.Name(r.status.code) for k, r in bad.items()} == {
        "no topic": "ILLEGAL_TOPIC", "unknown topic": "TOPIC_NOT_FOUND",
        "no message": "BAD_REQUEST", "empty body": "MESSAGE_BODY_EMPTY",
        "two topics": "BAD_REQUEST", "reserved": "ILLEGAL_MESSAGE_PROPERTY_KEY",
        "gzip": "NOT_IMPLEMENTED", "fifo timer": "MESSAGE_PROPERTY_CONFLICT_WITH_TYPE",
        "too far": "ILLEGAL_DELIVERY_TIME", "unknown topic send": "TOPIC_NOT_FOUND"}
    assert all(r.status.message for r in bad.values())
    cluster, _ = proxied
    from duomq.client import PullConsumer
    with PullConsumer("check", zookeeper=cluster.zookeeper, cluster=cluster.cluster) as c:
        assert sum(c.max_offset(mq) for mq in c.queues(topic)) == 0


def test_a_batch_of_entries_is_one_send_each_with_its_id(stub, topic):
    msgs = [message(topic, b"m%d" % i) for i in range(5)]
    r = stub.SendMessage(s.SendMessageRequest(messages=msgs), metadata=META, timeout=5)
    assert r.status.code == d.OK
    assert [e.message_id for e in r.entries] == [m.system_properties.message_id for m in msgs]
    assert [e.offset for e in r.entries] == list(range(r.entries[0].offset,
                                                       r.entries[0].offset + 5))


def test_telemetry_answers_settings_with_the_servers_and_refuses_the_rest(stub):
    cmd = s.TelemetryCommand()
    cmd.settings.client_type = d.PRODUCER
    cmd.settings.user_agent.language = d.PYTHON
    cmd.settings.publishing.max_body_size = 1 << 27
    out = stub.Telemetry(iter([cmd, s.TelemetryCommand()]), metadata=META, timeout=3)
    got = []
    with pytest.raises(grpc.RpcError):           # (the stream stays open: the deadline ends it)
        for r in out:
            got.append(r)
    first = got[0]
    assert first.status.code == d.OK and first.settings.backoff_policy.max_attempts == 3
    assert first.settings.publishing.max_body_size == 4 << 20        # the cluster's, not 128 MiB
    assert got[1].status.code == d.BAD_REQUEST
    anonymous = list(stub.Telemetry(iter([cmd]), timeout=3))
    assert [r.status.code for r in anonymous] == [d.CLIENT_ID_REQUIRED]


def test_garbage_on_the_port_is_dropped_and_the_proxy_goes_on(stub, proxied, topic):
    _cluster, proxy = proxied
    for junk in (b"GET / HTTP/1.1\r\n\r\n", b"\x00" * 64, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" +
                 b"\xff" * 100):
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=2) as sock:
            sock.sendall(junk)
            sock.settimeout(2)
            try:
                sock.recv(1024)
            except OSError:
                pass
    r = stub.SendMessage(s.SendMessageRequest(messages=[message(topic)]), metadata=META,
                         timeout=5)
    assert r.status.code == d.OK


UNIQ_KEY = "UNIQ_KEY"


def test_the_proxys_metrics_count_rpcs_by_code_and_its_clients(proxied, topic, rmq_config, rmq):
    import urllib.request

    from duomq.proxy.server import ProxyServer
    cluster, _ = proxied
    with ProxyServer(cluster.zookeeper, cluster.cluster, port=0, host="127.0.0.1",
                     metrics_port=0) as proxy:
        channel = grpc.insecure_channel(proxy.address)
        probe = rpc.MessagingServiceStub(channel)
        probe.SendMessage(s.SendMessageRequest(messages=[message(topic)]), metadata=META,
                          timeout=5)
        probe.SendMessage(s.SendMessageRequest(), metadata=META, timeout=5)
        list(probe.PullMessage(s.PullMessageRequest(), metadata=META, timeout=5))
        from rocketmq.v5.client import ClientConfiguration, Credentials
        p = rmq.producer(ClientConfiguration(proxy.address, Credentials("", "")), topic)
        try:
            import time
            deadline = time.monotonic() + 10         # (its settings reach the proxy after
            while True:                              # its start-up: asynchronously)
                text = urllib.request.urlopen(f"http://127.0.0.1:{proxy.metrics_port}/metrics",
                                              timeout=5).read().decode()
                if 'type="PRODUCER"' in text or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
        finally:
            p.shutdown()
        channel.close()
    assert 'duomq_proxy_rpcs_total{code="OK",rpc="SendMessage"} 1.0' in text
    assert 'duomq_proxy_rpcs_total{code="BAD_REQUEST",rpc="SendMessage"} 1.0' in text
    assert 'duomq_proxy_rpcs_total{code="BAD_REQUEST",rpc="PullMessage"} 1.0' in text
    assert 'duomq_proxy_rpc_seconds_count{rpc="SendMessage"} 2.0' in text
    assert 'duomq_proxy_clients{language="PYTHON",type="PRODUCER"} 1.0' in text
    assert "duomq_proxy_streams_open 1.0" in text
