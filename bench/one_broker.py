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
    with Producer(zookeeper=zk, cluster=cluster) as p:
        for lo in range(0, len(messages), batch):
            p.send_batch(messages[lo:lo + batch])
    return time.monotonic() - t0


def alternated(name: str, rounds: int, one) -> list[dict]:
    """An A/B comparison in one sitting: ``one(zookeeper, base_dir, i, on)``
    for ``rounds`` rounds, on then off, then off then on, ..., against one
    local ZooKeeper; the rounds' results in order."""
    import tempfile as _tempfile

    from duomq.dev.zookeeper import launch as _launch
    zk = _launch(os.environ.get("DUOMQ_ZOOKEEPER"))
    base = _tempfile.mkdtemp(prefix=f"duomq-{name}-", dir=os.environ.get("BENCH_DIR", "/var/tmp"))
    out: list[dict] = []
    try:
        for r in range(rounds):
            for on in ((True, False) if r % 2 == 0 else (False, True)):
                out.append(one(zk.connect, base, len(out), on))
    finally:
        zk.stop()
        shutil.rmtree(base, ignore_errors=True)
    return out


def medians(rounds: list[dict], flag: str, figures, on: str, off: str) -> dict:
    """Per figure, the median of the rounds with ``flag`` set (key ``on``)
    and without (``off``), and their ratio."""
    import statistics
    out = {}
    for figure in figures:
        a = statistics.median(x[figure] for x in rounds if x[flag])
        b = statistics.median(x[figure] for x in rounds if not x[flag])
        out[figure] = {on: a, off: b, "ratio": round(a / b, 3)}
    return out
