"""kill -9 under SYNC_FLUSH load: after a restart every acked message is there."""

import threading
import time

import pytest

from duomq.client import Message, Producer, PullConsumer, PullStatus, SendStatus

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.parametrize("producers", [1, 2])
def test_kill9_under_sync_flush_loses_no_acked_message(local_cluster, small_store, producers):
    """One producer: every send finds the serving thread idle, which then
    runs the group commit itself; two: sends also share the group-commit
    thread's syncs."""
    broker = local_cluster.add_broker("broker-a", flush="SYNC_FLUSH", sync_flush_timeout_ms=1000,
                                      **small_store)
    local_cluster.create_topic("Durable", queues=4)
    acked: set[bytes] = set()
    degraded = 0
    stop = threading.Event()
    errors = []

    def produce(worker):
        nonlocal degraded
        with Producer(zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster, send_timeout_ms=2000,
                      retry_times_when_send_failed=0) as p:
            i = 0
            while not stop.is_set():
                batch = [Message("Durable", b"w%d-%07d" % (worker, i + k)) for k in range(8)]
                i += 8
                try:
                    r = p.send_batch(batch)
                except Exception as exc:
                    errors.append(exc)
                    time.sleep(0.05)
                    continue
                if r.status is SendStatus.SEND_OK:
                    acked.update(m.body for m in batch)
                else:
                    degraded += 1

    threads = [threading.Thread(target=produce, args=(w,)) for w in range(producers)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while len(acked) < 3000 and time.monotonic() < deadline:
        time.sleep(0.05)
    broker.kill()                     # kill -9 mid-stream
    time.sleep(0.5)
    stop.set()
    for t in threads:
        t.join(15)
    assert len(acked) >= 3000, "producers did not get going"
    assert errors, "the kill should have failed some in-flight sends"
    broker.start()
    found = set()
    with PullConsumer("audit", zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster) as c:
        for mq in c.queues("Durable"):
            off = 0
            while (r := c.pull(mq, off, 1000)).status is PullStatus.FOUND:
                found.update(m.body for m in r.messages)
                off = r.next_offset
    lost = acked - found
    assert not lost, f"{len(lost)} acked messages lost"
