"""Two proxies in front of one cluster: a receipt handle or a transaction
id one of them gave is honoured by the other (a client may move between
them), and a proxy killed leaves the other serving."""

from __future__ import annotations

import uuid

import grpc

from duomq.proxy.protocol import d, rpc, s
from duomq.proxy.server import ProxyServer

META = (("x-mq-client-id", "mover"),)


def msg(topic, body, kind=d.NORMAL):
    m = d.Message(body=body)
    m.topic.name = topic
    m.system_properties.message_id = uuid.uuid4().hex
    m.system_properties.message_type = kind
    return m


def test_receipts_and_transactions_move_between_proxies(proxied, topic, rmq):
    cluster, _shared = proxied
    first = ProxyServer(cluster.zookeeper, cluster.cluster, port=0, host="127.0.0.1").start()
    with ProxyServer(cluster.zookeeper, cluster.cluster, port=0, host="127.0.0.1") as second:
        a = rpc.MessagingServiceStub(grpc.insecure_channel(first.address))
        b = rpc.MessagingServiceStub(grpc.insecure_channel(second.address))
        assert a.SendMessage(s.SendMessageRequest(messages=[msg(topic, b"moved")]),
                             metadata=META, timeout=5).status.code == d.OK
        mq = d.MessageQueue(id=-1)
        mq.topic.name, mq.broker.name = topic, "broker-a"
        group = d.Resource(name="movers")
        req = s.ReceiveMessageRequest(group=group, message_queue=mq, batch_size=4)
        req.invisible_duration.seconds = 30
        got = [r.message for r in a.ReceiveMessage(req, metadata=META, timeout=10)
               if r.HasField("message")]
        assert [m.body for m in got] == [b"moved"]
        ack = s.AckMessageRequest(group=group, topic=d.Resource(name=topic), entries=[
            s.AckMessageEntry(message_id=got[0].system_properties.message_id,
                              receipt_handle=got[0].system_properties.receipt_handle)])
        other = b.AckMessage(ack, metadata=(("x-mq-client-id", "someone-else"),), timeout=5)
        assert other.status.code == d.INVALID_RECEIPT_HANDLE       # not the receiver's
        assert b.AckMessage(ack, metadata=META, timeout=5).status.code == d.OK   # through B

        half = a.SendMessage(s.SendMessageRequest(messages=[msg(topic, b"tx", d.TRANSACTION)]),
                             metadata=META, timeout=5).entries[0]
        assert half.status.code == d.OK and half.transaction_id
        first.stop()                                              # A is gone
        end = b.EndTransaction(s.EndTransactionRequest(
            topic=d.Resource(name=topic), message_id=half.message_id,
            transaction_id=half.transaction_id, resolution=d.COMMIT,
            source=d.SOURCE_CLIENT), metadata=META, timeout=5)
        assert end.status.code == d.OK
        assert b.SendMessage(s.SendMessageRequest(messages=[msg(topic, b"after")]),
                             metadata=META, timeout=5).status.code == d.OK
    bodies = sorted(m.body for m in rmq.read_all(cluster, topic, 3))
    assert bodies == [b"after", b"moved", b"tx"]
