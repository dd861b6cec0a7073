"""A throwaway cluster for a benchmark: a local ZooKeeper and one broker
group in a temporary directory, removed afterwards."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile

from duomq.dev.harness import LocalCluster
from duomq.dev.zookeeper import launch


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
