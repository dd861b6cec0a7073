"""Retries and dead letters against a real broker (delay levels shortened to
10 ms .. 180 ms): a failed message comes back through %RETRY%<group> after
the delay of level 3 + its retries, and after max_reconsume_times (16) goes
to %DLQ%<group>, which keeps its original topic and id."""

import threading
import time
from collections import defaultdict

import pytest

from duomq.client import Message, Producer, PullConsumer, PullStatus, PushConsumer
from duomq.common.message import MessageQueue
from duomq.testing.harness import SHORT_DELAY_MS, SHORT_DELAYS, wait_for

pytestmark = pytest.mark.integration

LEVELS_MS, SHORT = SHORT_DELAY_MS, SHORT_DELAYS


def read_queue(zk, cl, mq, group="reader"):
    """The queue's messages; none while its topic is not made yet (a
    group's dead-letter topic is made at its first dead letter)."""
    from duomq.common.errors import TopicNotExistError
    with PullConsumer(group, zookeeper=zk, cluster=cl) as c:
        out, off = [], 0
        while True:
            try:
                r = c.pull(mq, off, max_messages=256)
            except TopicNotExistError:
                return out
            if r.status is PullStatus.NO_NEW_MESSAGE:
                return out
            out += r.messages
            off = r.next_offset


class Attempts:
    def __init__(self, fail_until=None):
        self.lock = threading.Lock()
        self.seen = defaultdict(list)          # body -> [(monotonic, reconsume_times, topic)]
        self.fail_until = fail_until or {}     # body -> attempts that fail (None: all)

    def __call__(self, m):
        with self.lock:
            self.seen[m.body].append((time.monotonic(), m.reconsume_times, m.topic))
            limit = self.fail_until.get(m.body, 0)
            if limit is None or len(self.seen[m.body]) <= limit:
                raise RuntimeError(f"cannot handle {m.body!r}")


@pytest.mark.parametrize("mode", ["concurrently", "orderly"])
def test_a_message_that_always_fails_reaches_the_dlq_after_16_retries(local_cluster, small_store,
                                                                       mode):
    local_cluster.add_broker("broker-a", **small_store, **SHORT)
    local_cluster.create_topic("Jobs", queues=2)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    handler = Attempts({b"doomed": None, b"twice": 2})
    c = PushConsumer("workers", topic="Jobs", on_message=handler, zookeeper=zk, cluster=cl, consume_mode=mode,
                     suspend_current_queue_ms=20).start()
    try:
        # the main queues; the retry topic is made at the first send back, then taken
        wait_for(lambda: len(c.assigned) == 2, what="the main queues assigned")
        with Producer(zookeeper=zk, cluster=cl) as p:
            doomed = p.send(Message("Jobs", b"doomed", tags="T", keys="k1"))
            p.send(Message("Jobs", b"twice"))
            p.send(Message("Jobs", b"fine"))
        dlq = MessageQueue("%DLQ%workers", "broker-a", 0)
        wait_for(lambda: read_queue(zk, cl, dlq), timeout_s=60, what="the dead letter")
        wait_for(lambda: len(handler.seen[b"twice"]) == 3, what="'twice' to pass")
    finally:
        c.shutdown()
    attempts = handler.seen[b"doomed"]
    assert len(attempts) == 17, "the first delivery and 16 retries"
    assert len(handler.seen[b"fine"]) == 1
    [dead] = read_queue(zk, cl, dlq)
    assert dead.body == b"doomed" and dead.tags == "T" and dead.keys == "k1"
    assert dead.properties["RETRY_TOPIC"] == "Jobs"
    assert dead.properties["ORIGIN_MESSAGE_ID"] == doomed.msg_id
    if mode == "concurrently":
        # each retry came through the retry topic, as first sent, after its level's delay
        assert [t for _, t, _ in attempts] == list(range(17))
        assert {topic for _, _, topic in attempts} == {"Jobs"}
        for k in range(16):
            gap = attempts[k + 1][0] - attempts[k][0]
            level = min(3 + k, 18)
            assert gap >= LEVELS_MS[level - 1] / 1000 - 0.005, f"retry {k + 1} came early"
            assert gap < LEVELS_MS[level - 1] / 1000 + 1.0, f"retry {k + 1} came late"
        assert c.sent_back == [16 + 2, 1]       # doomed 16 times, twice twice
        assert dead.reconsume_times == 16
    else:
        # orderly: retried in place (the queue waits), then set aside in the DLQ
        assert {t for _, t, _ in attempts} == {0}
        assert c.sent_back == [0, 1]


def test_a_retry_survives_the_consumer_and_goes_to_the_next_member(local_cluster, small_store):
    """The retry lives on the broker: a consumer that fails a message and
    leaves does not take the retry with it."""
    local_cluster.add_broker("broker-a", **small_store, **SHORT)
    local_cluster.create_topic("Hand", queues=1)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    first = Attempts({b"m": None})
    c1 = PushConsumer("hand", topic="Hand", on_message=first, zookeeper=zk, cluster=cl).start()
    try:
        wait_for(lambda: len(c1.assigned) == 1, what="c1's queue (no retry topic yet)")
        with Producer(zookeeper=zk, cluster=cl) as p:
            p.send(Message("Hand", b"m"))
        wait_for(lambda: c1.sent_back[0] >= 1, what="a send back")
    finally:
        c1.shutdown()
    second = Attempts()
    with PushConsumer("hand", topic="Hand", on_message=second, zookeeper=zk, cluster=cl).start():
        wait_for(lambda: second.seen[b"m"], what="the retry at the next member")
    assert second.seen[b"m"][0][1] >= 1, "it came as a retry"


def test_an_operator_lists_reads_and_resends_dead_letters(local_cluster, small_store):
    import json
    import os
    import subprocess
    import sys
    local_cluster.add_broker("broker-a", **small_store, **SHORT)
    local_cluster.create_topic("Orders", queues=1)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    env = {**os.environ, "DUOMQ_ZOOKEEPER": zk, "DUOMQ_CLUSTER": cl}

    def duomq(*args):
        p = subprocess.run([sys.executable, "-m", "duomq", *args, "--json"], env=env,
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        return [json.loads(line) for line in p.stdout.splitlines()]

    broken = Attempts({b"bad": None})
    c = PushConsumer("billing", topic="Orders", on_message=broken, zookeeper=zk, cluster=cl,
                     max_reconsume_times=0).start()          # no retry: straight to the DLQ
    try:
        wait_for(lambda: len(c.assigned) == 1, what="the queue assigned")
        with Producer(zookeeper=zk, cluster=cl) as p:
            sent = p.send(Message("Orders", b"bad", tags="Paid", properties={"trace": "t1"}))
            p.send(Message("Orders", b"good"))
        wait_for(lambda: c.sent_back[1] == 1, what="the dead letter")
    finally:
        c.shutdown()
    [row] = duomq("dlq", "list", "--group", "billing")
    assert row["body"] == "bad" and row["original_topic"] == "Orders"
    assert row["original_id"] == sent.msg_id and row["topic"] == "%DLQ%billing"
    [original] = duomq("message", "get", sent.msg_id)
    assert original["body"] == "bad" and original["topic"] == "Orders"
    assert original["properties"] == {"trace": "t1"}
    [resent] = duomq("dlq", "resend", "--group", "billing", "--id", row["msg_id"])
    assert resent["status"] == "SEND_OK" and resent["topic"] == "Orders"
    fixed = Attempts()
    with PushConsumer("billing", topic="Orders", on_message=fixed, zookeeper=zk, cluster=cl).start():
        wait_for(lambda: fixed.seen[b"bad"], what="the resent message")
    assert list(fixed.seen) == [b"bad"], "only the resent message: the rest was consumed"
    bad = subprocess.run([sys.executable, "-m", "duomq", "message", "get", "broker-a:nonsense"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "not a duomq message id" in bad.stderr
