"""Transactional messages from the official RocketMQ 5 producer through
``duomq proxy``: committed ones are delivered, rolled-back ones never; one
left open is checked back with the producer (its TransactionChecker, over
the Telemetry stream) and ends as the checker says."""

from __future__ import annotations

import time


def tx_producer(config, topic, verdicts):
    from rocketmq.v5.producer import Producer, TransactionChecker

    class Checker(TransactionChecker):
        def check(self, message):
            verdicts.append(message.message_id)
            from rocketmq.grpc_protocol import TransactionResolution
            return TransactionResolution.COMMIT

    p = Producer(config, (topic,), Checker())
    p.startup()
    return p


def test_commit_delivers_and_rollback_does_not(proxied, topic, rmq_config, rmq):
    cluster, _ = proxied
    p = tx_producer(rmq_config, topic, [])
    try:
        sent = {}
        for body, end in ((b"committed", "commit"), (b"rolled back", "rollback")):
            t = p.begin_transaction()
            r = p.send(rmq.message(topic, body), t)
            assert r.transaction_id
            sent[body] = r.message_id
            held = rmq.read_all(cluster, topic, 2, timeout_s=0.5)
            assert body not in [m.body for m in held]                   # held back
            getattr(t, end)()
    finally:
        p.shutdown()
    time.sleep(0.5)
    got = rmq.read_all(cluster, topic, 2, timeout_s=1)
    assert [m.body for m in got] == [b"committed"]
    assert got[0].properties["UNIQ_KEY"] == sent[b"committed"]


def test_an_open_transaction_is_checked_back_with_the_producer(local_cluster, tmp_path, rmq):
    from rocketmq.v5.client import ClientConfiguration, Credentials

    from duomq.proxy.server import ProxyServer
    local_cluster.add_broker("broker-a", 0, transaction_check_interval_ms=500,
                             transaction_timeout_ms=500)
    local_cluster.create_topic("TxOpen", 2)
    with ProxyServer(local_cluster.zookeeper, local_cluster.cluster, port=0,
                     host="127.0.0.1") as proxy:
        config = ClientConfiguration(proxy.address, Credentials("", ""), request_timeout=5)
        verdicts: list[str] = []
        p = tx_producer(config, "TxOpen", verdicts)
        try:
            t = p.begin_transaction()
            r = p.send(rmq.message("TxOpen", b"open"), t)            # never ended by the client
            got = rmq.read_all(local_cluster, "TxOpen", 1, timeout_s=20)
        finally:
            p.shutdown()
    assert verdicts and verdicts[0] == r.message_id
    assert [m.body for m in got] == [b"open"]
