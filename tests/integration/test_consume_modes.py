"""Concurrent and orderly consumption against a real broker: the committed
offset never passes a message still in hand, a wide window pauses pulling,
and orderly consumption keeps each queue's order through a rebalance, with a
failing message retried in place."""

import threading
import time
from collections import defaultdict

import pytest

from duomq.client import Message, Producer, PullConsumer, PushConsumer
from duomq.testing.harness import SHORT_DELAYS, wait_for

pytestmark = pytest.mark.integration


def produce(zk, cl, topic, n, batch=100):
    with Producer(zookeeper=zk, cluster=cl) as p:
        for lo in range(0, n, batch):
            p.send_batch([Message(topic, b"%06d" % i) for i in range(lo, min(n, lo + batch))])


def committed(zk, cl, group, topic):
    with PullConsumer(group, zookeeper=zk, cluster=cl) as c:
        return {q.queue_id: c.committed(q) for q in c.queues(topic)}


def test_a_stuck_message_holds_the_committed_offset_and_the_window(local_cluster, small_store):
    local_cluster.add_broker("broker-a", **small_store)
    local_cluster.create_topic("Stuck", queues=1)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    produce(zk, cl, "Stuck", 2000)
    release = threading.Event()
    done = set()
    lock = threading.Lock()

    def on_message(m):
        if m.queue_offset == 50:
            release.wait(60)
        with lock:
            done.add(m.queue_offset)

    c = PushConsumer("stuck", topic="Stuck", on_message=on_message, zookeeper=zk, cluster=cl,
                     consume_from="first",
                     pull_batch_size=32, consume_concurrently_max_span=300, consume_threads=4,
                     offset_commit_interval_ms=100).start()
    try:
        # the others go on, up to the window: 300 past the stuck one, plus one pull
        wait_for(lambda: len(done) >= 300, what="the other messages to be consumed")
        time.sleep(0.5)
        pq = c.assigned[c.held()[0]]
        assert 50 + 300 <= pq.next_pull <= 50 + 300 + 32, "pulling paused at the span"
        assert max(done) < pq.next_pull and 50 not in done
        c.commit_offsets()
        assert committed(zk, cl, "stuck", "Stuck") == {0: 50}
        release.set()
        wait_for(lambda: len(done) == 2000, what="everything once released")
        wait_for(lambda: committed(zk, cl, "stuck", "Stuck") == {0: 2000}, what="the commit")
    finally:
        release.set()
        c.shutdown()


def test_concurrent_consumption_uses_the_pool(local_cluster, small_store):
    local_cluster.add_broker("broker-a", **small_store)
    local_cluster.create_topic("Slow", queues=2)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    produce(zk, cl, "Slow", 400)
    threads = set()
    seen = []
    lock = threading.Lock()

    def on_message(m):
        time.sleep(0.005)                   # I/O-bound work: threads overlap
        with lock:
            threads.add(threading.current_thread().name)
            seen.append(m.body)

    t0 = time.monotonic()
    with_pool = PushConsumer("pool", topic="Slow", on_message=on_message, zookeeper=zk, cluster=cl,
                             consume_from="first", consume_threads=8).start()
    try:
        wait_for(lambda: len(seen) == 400, what="all 400")
    finally:
        with_pool.shutdown()
    # 400 x 5 ms is 2 s on one thread
    assert time.monotonic() - t0 < 1.8 and len(threads) >= 4
    assert sorted(seen) == [b"%06d" % i for i in range(400)]


def test_without_consume_threads_the_handler_runs_on_the_io_thread(local_cluster, small_store):
    """consume_threads = 0: each message handled on the client's I/O thread
    as its pull answer comes (no consume thread is ever started), a failed
    one sent back and handled again, everything once otherwise."""
    local_cluster.add_broker("broker-a", **small_store, **SHORT_DELAYS)
    local_cluster.create_topic("Inline", queues=2)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    produce(zk, cl, "Inline", 400)
    threads = set()
    seen = []
    failed = []
    lock = threading.Lock()

    def on_message(m):
        with lock:
            threads.add(threading.current_thread().name)
            if m.body == b"%06d" % 123 and not failed:
                failed.append(m.msg_id)
                raise RuntimeError("once")
            seen.append(m.body)

    c = PushConsumer("inline", topic="Inline", on_message=on_message, zookeeper=zk, cluster=cl,
                     consume_from="first", consume_threads=0).start()
    try:
        wait_for(lambda: len(seen) == 400, what="all 400, the failed one again")
        assert c._consume.pool.size == 0
    finally:
        c.shutdown()
    assert sorted(seen) == [b"%06d" % i for i in range(400)] and len(failed) == 1
    assert {t.split("-")[0] + "-" + t.split("-")[1] for t in threads} == {"duomq-io"}, threads


class OrderCheck:
    """Records, per queue, the offsets in the order handlers ran, and how many
    handlers ran on one queue at once."""

    def __init__(self, delay_s=0.0, fail=None):
        self.lock = threading.Lock()
        self.order = defaultdict(list)
        self.active = defaultdict(int)
        self.overlaps = 0
        self.delay_s = delay_s
        self.fail = dict(fail or {})          # queue offset of queue 0 -> failures left
        self.times = {}

    def handler(self, name):
        def on_message(m):
            key = (m.broker_group, m.queue_id)
            with self.lock:
                self.active[key] += 1
                self.overlaps += self.active[key] > 1
            try:
                if self.delay_s:
                    time.sleep(self.delay_s)
                with self.lock:
                    if m.queue_id == 0 and self.fail.get(m.queue_offset, 0) > 0:
                        self.fail[m.queue_offset] -= 1
                        self.times.setdefault(m.queue_offset, []).append(time.monotonic())
                        raise RuntimeError("not yet")
                    self.order[key].append((m.queue_offset, name))
                    if m.queue_id == 0:
                        self.times.setdefault(m.queue_offset, []).append(time.monotonic())
            finally:
                with self.lock:
                    self.active[key] -= 1
        return on_message

    def offsets(self, key):
        return [o for o, _ in self.order[key]]


@pytest.mark.parametrize("threads", [20, 0])
def test_orderly_keeps_queue_order_through_a_rebalance(local_cluster, small_store, threads):
    local_cluster.add_broker("broker-a", **small_store)
    local_cluster.create_topic("Ordered", queues=4)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    check = OrderCheck(delay_s=0.002)
    # little in hand (a hand-off consumes it first), so queues move mid-stream
    opts = dict(zookeeper=zk, cluster=cl, consume_from="first", consume_mode="orderly",
                offset_commit_interval_ms=200, pull_batch_size=16, pull_threshold_for_queue=20,
                consume_threads=threads)
    c1 = PushConsumer("ordered", topic="Ordered", on_message=check.handler("c1"), **opts).start()
    c2 = None
    try:
        wait_for(lambda: len(c1.held()) == 4, what="c1 to hold all 4 queues")
        produce(zk, cl, "Ordered", 1200, batch=40)
        wait_for(lambda: sum(map(len, check.order.values())) >= 200, what="c1 under way")
        c2 = PushConsumer("ordered", topic="Ordered", on_message=check.handler("c2"), **opts).start()
        wait_for(lambda: len(c1.held()) == 2 and len(c2.held()) == 2, what="a 2/2 split")
        wait_for(lambda: sum(len(set(check.offsets(k))) for k in list(check.order)) == 1200,
                 what="all 1200")
    finally:
        c1.shutdown()
        if c2:
            c2.shutdown()
    assert check.overlaps == 0, "two handlers ran on one queue at once"
    handed_over = 0
    assert sum(map(len, check.order.values())) == 1200
    for key, seq in check.order.items():
        offsets = [o for o, _ in seq]
        assert offsets == list(range(len(offsets))), f"queue {key} out of order or repeated"
        handed_over += len({n for _, n in seq}) > 1
    assert handed_over == 2, "two queues moved from c1 to c2 mid-stream"


@pytest.mark.parametrize("threads", [20, 0])
def test_orderly_retries_a_failed_message_in_place_after_a_pause(local_cluster, small_store,
                                                                 threads):
    local_cluster.add_broker("broker-a", **small_store)
    local_cluster.create_topic("Retry", queues=1)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    produce(zk, cl, "Retry", 100)
    check = OrderCheck(fail={10: 2})
    c = PushConsumer("inplace", topic="Retry", on_message=check.handler("c"), zookeeper=zk, cluster=cl,
                     consume_from="first", consume_mode="orderly",
                     suspend_current_queue_ms=300, consume_threads=threads).start()
    try:
        wait_for(lambda: len(check.order[("broker-a", 0)]) == 100, what="all 100")
    finally:
        c.shutdown()
    assert check.offsets(("broker-a", 0)) == list(range(100))
    t = check.times[10]                      # two failures, then the success
    assert len(t) == 3 and t[1] - t[0] >= 0.29 and t[2] - t[1] >= 0.29
    assert check.times[11][0] > t[2]


def test_a_shutdown_while_the_io_thread_runs_a_handler_finishes_it_and_commits_it(
        local_cluster, small_store):
    """consume_threads = 0, shutdown from another thread while a handler
    blocks the I/O thread: the shutdown waits for that message, commits past
    it, and the next member of the group starts after it: nothing is read
    twice, nothing is skipped."""
    local_cluster.add_broker("broker-a", **small_store)
    local_cluster.create_topic("InlineStop", queues=1)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    produce(zk, cl, "InlineStop", 50)
    entered, release = threading.Event(), threading.Event()
    first: list[bytes] = []

    def blocking(m):
        first.append(m.body)
        if m.body == b"%06d" % 10:
            entered.set()
            release.wait(30)

    c = PushConsumer("inline-stop", topic="InlineStop", on_message=blocking, zookeeper=zk, cluster=cl,
                     consume_from="first", consume_threads=0, pull_batch_size=16).start()
    assert entered.wait(30)
    stopper = threading.Thread(target=c.shutdown)
    stopper.start()
    time.sleep(0.3)                        # the shutdown is under way, the handler still blocked
    assert stopper.is_alive()
    release.set()
    stopper.join(30)
    assert not stopper.is_alive()
    assert b"%06d" % 10 in first and first == sorted(set(first))
    second: list[bytes] = []
    c2 = PushConsumer("inline-stop", topic="InlineStop", on_message=lambda m: second.append(m.body),
                      zookeeper=zk, cluster=cl,
                      consume_from="first", consume_threads=0).start()
    try:
        wait_for(lambda: len(first) + len(second) >= 50, what="the rest, by the next member")
        time.sleep(0.3)
    finally:
        c2.shutdown()
    assert sorted(first + second) == [b"%06d" % i for i in range(50)]
