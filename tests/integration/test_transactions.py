"""Transactional messages against real brokers: a half message no consumer
sees, commit and rollback, repeated and contradicting ends, unknown ids,
a delay kept through the commit, and a SYNC pair's master killed between
the half message and its commit (the commit lands on the new master, and
once the old one is back as its slave, consumers see the message once)."""

import json
import time
import urllib.request
from collections import Counter

import pytest

from duomq.client import (
    Message,
    PullConsumer,
    TransactionProducer,
    TransactionState,
)
from duomq.common.errors import (
    BadRequestError,
    ConfigError,
    TransactionEndedError,
    TransactionNotFoundError,
)
from duomq.common.message import MessageQueue
from duomq.testing.harness import master_id, run_cli, wait_for

pytestmark = pytest.mark.integration


def bodies(zk, cl, topic="Orders", group="audit"):
    """Every body stored in ``topic`` (its queues on broker-a), with properties."""
    out = []
    with PullConsumer(group, zookeeper=zk, cluster=cl) as c:
        for mq in c.queues(topic):
            off = 0
            while (r := c.pull(mq, off, 100)).messages:
                out += [(m.body, m) for m in r.messages]
                off = r.next_offset
    return out


def test_commit_rollback_and_repeated_ends(local_cluster):
    local_cluster.add_broker("broker-a", 0)
    local_cluster.create_topic("Orders", 2)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    seen_during, ids = [], []

    def commit(msg, arg):
        seen_during.append(len(bodies(zk, cl)))      # the half message is not visible yet
        ids.append(msg.properties["TRAN_HALF_ID"])   # its id, for the application to record
        return TransactionState.COMMIT

    with TransactionProducer("orders", zookeeper=zk, cluster=cl) as p:
        ok = p.send_in_transaction(Message("Orders", b"paid", tags="T", keys="k1",
                                           properties={"order": "7"}), commit, arg=7)
        assert ok.local_state is TransactionState.COMMIT and ids == [ok.transaction_id]
        no = p.send_in_transaction(Message("Orders", b"cancelled"),
                                   lambda m, a: TransactionState.ROLLBACK)
        assert no.local_state is TransactionState.ROLLBACK

        def fails(msg, arg):
            raise RuntimeError("the database went away")
        unknown = p.send_in_transaction(Message("Orders", b"unsure"), fails)
        assert unknown.local_state is TransactionState.UNKNOWN

        stored = bodies(zk, cl)
        assert seen_during == [0]
        assert [b for b, _ in stored] == [b"paid"]         # neither the rolled back nor the pending
        msg = stored[0][1]
        assert (msg.tags, msg.keys, msg.properties["order"]) == ("T", "k1", "7")
        assert msg.properties["TRAN_HALF_ID"] == ok.transaction_id
        assert "TRAN_MSG" not in msg.properties and "REAL_TOPIC" not in msg.properties

        # repeated ends change nothing; a contradicting one is refused
        assert p.end_transaction(ok.transaction_id, "Orders", TransactionState.COMMIT).already
        with pytest.raises(TransactionEndedError, match="already committed"):
            p.end_transaction(ok.transaction_id, "Orders", TransactionState.ROLLBACK)
        with pytest.raises(TransactionEndedError, match="already rolled back"):
            p.end_transaction(no.transaction_id, "Orders", TransactionState.COMMIT)
        with pytest.raises(TransactionNotFoundError):
            p.end_transaction("broker-a:0000000000000001", "Orders", TransactionState.COMMIT)
        with TransactionProducer("others", zookeeper=zk, cluster=cl) as stranger:
            for tid in (ok.transaction_id, unknown.transaction_id):   # ended, and pending
                with pytest.raises(BadRequestError, match="producer group 'orders'"):
                    stranger.end_transaction(tid, "Orders", TransactionState.ROLLBACK)
        # the pending one, ended later
        late = p.end_transaction(unknown.transaction_id, "Orders", TransactionState.COMMIT)
        assert not late.already and late.topic == "Orders"
        assert sorted(b for b, _ in bodies(zk, cl)) == [b"paid", b"unsure"]


def test_a_committed_message_keeps_its_delay(local_cluster):
    local_cluster.add_broker("broker-a", 0)
    local_cluster.create_topic("Orders", 1)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    with TransactionProducer("orders", zookeeper=zk, cluster=cl) as p:
        t0 = time.time()
        r = p.send_in_transaction(Message("Orders", b"later", delay_level=1),
                                  lambda m, a: TransactionState.COMMIT)
        assert r.local_state is TransactionState.COMMIT
    wait_for(lambda: bodies(zk, cl), 15, "the delayed message after its commit")
    (_, msg), = bodies(zk, cl)
    assert msg.store_timestamp_ms / 1000 - t0 >= 0.9


def test_a_commit_after_the_master_died_lands_once_on_the_new_master(local_cluster):
    settings = {"replication": "SYNC", "flush": "SYNC_FLUSH"}
    first = local_cluster.add_broker("broker-a", 0, **settings)
    local_cluster.add_broker("broker-a", 1, **settings)
    local_cluster.create_topic("Orders", 2)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    with TransactionProducer("orders", zookeeper=zk, cluster=cl) as p:
        wait_for(lambda: p.send_in_transaction(
            Message("Orders", b"warm-up"), lambda m, a: TransactionState.ROLLBACK
        ).send_result.ok, 20, "the pair to ack")
        r = p.send_in_transaction(Message("Orders", b"survives"),
                                  lambda m, a: TransactionState.UNKNOWN)
        assert r.send_result.ok and r.local_state is TransactionState.UNKNOWN
        first.kill()
        wait_for(lambda: master_id(zk, cl) == 1, 30, "the slave to take over")
        resp = p.end_transaction(r.transaction_id, "Orders", TransactionState.COMMIT,
                                 timeout_ms=20_000)
        assert not resp.already
        assert p.end_transaction(r.transaction_id, "Orders", TransactionState.COMMIT).already
    first.restart()                 # the pair whole again: what the new master holds is visible
    wait_for(lambda: bodies(zk, cl), 30, "the committed message, confirmed by the pair")
    assert [b for b, _ in bodies(zk, cl)] == [b"survives"]
    # nothing reached the queues but the commit
    with PullConsumer("audit2", zookeeper=zk, cluster=cl) as c:
        assert sum(c.max_offset(MessageQueue("Orders", "broker-a", q)) for q in (0, 1)) == 1


CHECKING = {"transaction_timeout_ms": 500, "transaction_check_interval_ms": 300,
            "transaction_check_max": 3}


def master_status(zk, cl) -> dict:
    doc = json.loads(run_cli("status", "--json", "--zookeeper", zk, "--cluster", cl).stdout)
    (master,) = [b for b in doc["brokers"] if b.get("role") == "MASTER"]
    return master


def test_an_unknown_transaction_is_resolved_by_a_check_back(local_cluster):
    local_cluster.add_broker("broker-a", 0, **CHECKING)
    local_cluster.create_topic("Orders", 1)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    asked = []

    def check(msg):
        asked.append(msg)
        return TransactionState.COMMIT

    with TransactionProducer("orders", checker=check, zookeeper=zk, cluster=cl) as p:
        r = p.send_in_transaction(Message("Orders", b"later", keys="k9"),
                                  lambda m, a: TransactionState.UNKNOWN)
        wait_for(lambda: bodies(zk, cl), 15, "the check-back to commit it")
    assert [b for b, _ in bodies(zk, cl)] == [b"later"]
    first = asked[0]
    assert (first.topic, first.keys, first.msg_id) == ("Orders", "k9", r.transaction_id)
    assert first.properties["TRAN_HALF_ID"] == r.transaction_id
    assert "TRAN_MSG" not in first.properties


def test_a_dead_producers_transaction_is_checked_back_on_another(local_cluster):
    local_cluster.add_broker("broker-a", 0, **CHECKING)
    local_cluster.create_topic("Orders", 1)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    with TransactionProducer("orders", zookeeper=zk, cluster=cl) as dying:
        r = dying.send_in_transaction(Message("Orders", b"orphan"),
                                      lambda m, a: TransactionState.UNKNOWN)
    with TransactionProducer("orders", checker=lambda m: TransactionState.COMMIT,
                             zookeeper=zk, cluster=cl) as other:
        wait_for(lambda: bodies(zk, cl), 15, "another producer of the group to commit it")
        assert other.checks_answered >= 1
    assert [m.properties["TRAN_HALF_ID"] for _, m in bodies(zk, cl)] == [r.transaction_id]


def test_check_backs_stop_at_transaction_check_max_then_roll_back(local_cluster):
    broker = local_cluster.add_broker("broker-a", 0, **CHECKING)
    local_cluster.create_topic("Orders", 1)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    asked = Counter()

    def undecided(msg):
        asked[msg.msg_id] += 1
        return TransactionState.UNKNOWN

    with TransactionProducer("orders", checker=undecided, zookeeper=zk, cluster=cl) as p:
        ids = [p.send_in_transaction(Message("Orders", b"m%d" % i),
                                     lambda m, a: TransactionState.UNKNOWN).transaction_id
               for i in range(5)]
        wait_for(lambda: master_status(zk, cl)["transactions_discarded"] == 5, 30,
                 "the broker to give up on all five")
        status = master_status(zk, cl)
        assert status["transactions_pending"] == 0 and status["transaction_checks"] == 15
        assert dict(asked) == {i: 3 for i in ids}           # exactly transaction_check_max each
        with pytest.raises(TransactionEndedError, match="already rolled back"):
            p.end_transaction(ids[0], "Orders", TransactionState.COMMIT)
    assert bodies(zk, cl) == []
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/metrics") as r:
        metrics = r.read().decode()
    for line in ("duomq_transactions_pending 0.0", "duomq_transaction_checks_total 15.0",
                 "duomq_transactions_discarded_total 5.0"):
        assert line in metrics.splitlines(), line


def test_operators_list_and_resolve_pending_transactions(local_cluster):
    local_cluster.add_broker("broker-a", 0)
    local_cluster.create_topic("Orders", 1)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    ep = ["--zookeeper", zk, "--cluster", cl]
    with TransactionProducer("orders", zookeeper=zk, cluster=cl) as p:
        ids = [p.send_in_transaction(Message("Orders", b"o%d" % i, keys=f"k{i}"),
                                     lambda m, a: TransactionState.UNKNOWN).transaction_id
               for i in range(3)]
    listed = json.loads(run_cli("tx", "list", "--group", "orders", "--json", *ep).stdout)
    assert [t["transaction_id"] for t in listed["transactions"]] == ids
    assert listed["pending"] == {"broker-a": 3}
    first = listed["transactions"][0]
    assert (first["topic"], first["keys"], first["checks"]) == ("Orders", "k0", 0)
    assert json.loads(run_cli("tx", "list", "--group", "other", "--json", *ep).stdout)[
        "transactions"] == []
    said = run_cli("tx", "resolve", ids[0], "--commit", *ep).stdout
    assert f"{ids[0]}: committed to Orders#0" in said
    assert "already committed" in run_cli("tx", "resolve", ids[0], "--commit", *ep).stdout
    run_cli("tx", "resolve", ids[1], "--rollback", *ep)
    p = run_cli("tx", "resolve", ids[1], "--commit", *ep, check=False)
    assert p.returncode == 2 and "already rolled back" in p.stderr
    p = run_cli("tx", "resolve", "not-an-id", "--commit", *ep, check=False)
    assert p.returncode == 2 and "is not a transaction id" in p.stderr
    human = run_cli("tx", "list", *ep).stdout
    assert ids[2] in human and "1 pending transaction(s)" in human
    assert [b for b, _ in bodies(zk, cl)] == [b"o0"]


def test_an_ordered_topics_queue_holds_a_keys_messages_in_commit_order(local_cluster):
    local_cluster.add_broker("broker-a", 0)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    run_cli("topic", "create", "Ordered", "--queues", "4", "--order", "--zookeeper", zk,
            "--cluster", cl)
    with TransactionProducer("orders", zookeeper=zk, cluster=cl) as p:
        sent = {body: p.send_in_transaction(Message("Ordered", body), lambda m, a:
                                            TransactionState.UNKNOWN, sharding_key="order-7")
                for body in (b"created", b"paid", b"shipped")}
        queues = {r.send_result.queue for r in sent.values()}
        assert len(queues) == 1                           # one key, one queue
        for body in (b"created", b"shipped", b"paid"):    # ended in this order
            p.end_transaction(sent[body].transaction_id, "Ordered", TransactionState.COMMIT)
    (mq,) = queues
    with PullConsumer("audit", zookeeper=zk, cluster=cl) as c:
        got = [m.body for m in c.pull(mq, 0, 10).messages]
    assert got == [b"created", b"shipped", b"paid"]


def test_the_new_master_resumes_the_check_backs(local_cluster):
    settings = {"replication": "SYNC", "flush": "SYNC_FLUSH", **CHECKING,
                "transaction_timeout_ms": 3000}
    first = local_cluster.add_broker("broker-a", 0, **settings)
    local_cluster.add_broker("broker-a", 1, **settings)
    local_cluster.create_topic("Orders", 1)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    asked = []

    def check(msg):
        asked.append(msg.msg_id)
        return TransactionState.COMMIT

    with TransactionProducer("orders", checker=check, zookeeper=zk, cluster=cl) as p:
        wait_for(lambda: p.send_in_transaction(
            Message("Orders", b"warm-up"), lambda m, a: TransactionState.ROLLBACK
        ).send_result.ok, 20, "the pair to ack")
        r = p.send_in_transaction(Message("Orders", b"pending"),
                                  lambda m, a: TransactionState.UNKNOWN)
        assert r.send_result.ok
        first.kill()                  # before its timeout: the old master never asked
        wait_for(lambda: master_id(zk, cl) == 1, 30, "the slave to take over")
        first.restart()               # the pair whole again, so the commit becomes visible
        wait_for(lambda: [b for b, _ in bodies(zk, cl)] == [b"pending"], 30,
                 "the new master to check it back and commit it")
    assert asked == [r.transaction_id]


def test_a_transaction_producer_with_settings_the_group_refuses_says_so(local_cluster):
    """A send timeout shorter than the group's flush and slave waits is a
    ConfigError at construction, for a TransactionProducer as for a
    Producer (its own close ran before its parts were made: AttributeError)."""
    local_cluster.add_broker("broker-a", 0, flush="SYNC_FLUSH", replication="SYNC")
    with pytest.raises(ConfigError, match="must exceed the flush and slave timeouts"):
        TransactionProducer("txg", zookeeper=local_cluster.zookeeper,
                            cluster=local_cluster.cluster, send_timeout_ms=1000)


def test_an_end_naming_another_epochs_half_ends_nothing(local_cluster):
    """A transaction id carries its half message's epoch: an end whose id
    names another epoch than the half at that offset (a failover cut the
    one named and another half took its place) is not found and ends
    nothing; the id as given, or its earlier form (no epoch), ends it."""
    local_cluster.add_broker("broker-a", 0)
    local_cluster.create_topic("Orders", 1)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    with TransactionProducer("orders", zookeeper=zk, cluster=cl) as p:
        pending = p.send_in_transaction(Message("Orders", b"later"),
                                        lambda m, a: TransactionState.UNKNOWN)
        other = p.send_in_transaction(Message("Orders", b"too"),
                                      lambda m, a: TransactionState.UNKNOWN)
        tid = pending.transaction_id
        group, digits = tid.rsplit(":", 1)
        assert int(digits[:8], 16) == pending.send_result.epoch >= 1
        forged = f"{group}:{int(digits[:8], 16) + 1:08X}{digits[8:]}"
        with pytest.raises(TransactionNotFoundError, match="a failover cut the one named"):
            p.end_transaction(forged, "Orders", TransactionState.COMMIT)
        assert bodies(zk, cl) == []                               # nothing ended
        assert not p.end_transaction(tid, "Orders", TransactionState.COMMIT).already
        # the earlier form: the other one ended by it, the first seen as ended
        assert not p.end_transaction(f"{group}:{other.transaction_id[-16:]}", "Orders",
                                     TransactionState.COMMIT).already
        assert p.end_transaction(f"{group}:{digits[8:]}", "Orders",
                                 TransactionState.COMMIT).already
    assert sorted(b for b, _ in bodies(zk, cl)) == [b"later", b"too"]
