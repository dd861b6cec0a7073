"""A throwaway cluster for a benchmark: a local ZooKeeper and one broker
group in a temporary directory, removed afterwards; and a backlog sender."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time

from duomq.client import Producer
from duomq.dev.zookeeper import launch
from duomq.testing.harness import LocalCluster


@contextlib.contextmanager
def one_broker(name: str, topic: str, queues: int, **settings):
    """Yields ``(zookeeper, cluster)`` with ``topic`` created on ``broker-a``."""
    base = tempfile.mkdtemp(prefix=f"duomq-{name.lower()}-")
    zk = launch(data_dir=os.path.join(base, "zk"))
    cluster = LocalCluster(zk.connect, f"{name}{os.getpid()}", os.path.join(base, "brokers"))
    try:
        cluster.add_broker("broker-a", 0, **settings)
        cluster.create_topic(topic, queues)
        yield zk.connect, cluster.cluster
    finally:
        cluster.stop_all()
        zk.stop()
        shutil.rmtree(base, ignore_errors=True)


def send_all(zk: str, cluster: str, messages, batch: int = 512) -> float:
    """Send ``messages`` in stop-and-wait batches; returns the seconds taken."""
    t0 = time.monotonic()
    with Producer(zk, cluster) as p:
        for lo in range(0, len(messages), batch):
            p.send_batch(messages[lo:lo + batch])
    return time.monotonic() - t0
