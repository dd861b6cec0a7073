"""One look at a cluster: every registered broker's member node (group, id,
role, epoch, address, metrics URL) and a scrape of its ``/metrics``, taken
in parallel with a short timeout (a broker that does not answer is shown
as such, and the rest of the screen goes on)."""

from __future__ import annotations

import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from kazoo.exceptions import NoNodeError
from prometheus_client.parser import text_string_to_metric_families

from duomq.coordinator import zk as zkutil
from duomq.coordinator.nodes import MemberNode
from duomq.coordinator.paths import ZkPaths

SCRAPE_TIMEOUT_S = 1.0
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]   # (name, sorted labels) -> value


@dataclass
class Broker:
    group: str
    broker_id: int
    info: MemberNode                    # its member node
    samples: Samples = field(default_factory=dict)
    error: str = ""                     # why there are no samples


@dataclass
class Snapshot:
    at: float                           # monotonic seconds
    brokers: list[Broker]


def parse(text: str) -> Samples:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def _scrape(b: Broker) -> None:
    url = b.info.metrics
    if not url:
        b.error = "no metrics (metrics_port = -1)"
        return
    try:
        with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_S) as r:
            b.samples = parse(r.read().decode())
    except Exception as exc:      # a broker half-answering must not take the screen down
        b.error = f"scrape failed: {getattr(exc, 'reason', exc)}"


def members(zk, cluster: str) -> list[Broker]:
    paths = ZkPaths(cluster)
    out: list[Broker] = []
    try:
        groups = sorted(zk.get_children(paths.brokers))
    except NoNodeError:
        return out
    for g in groups:
        out.extend(Broker(g, i, m) for i, m in zkutil.read_members(zk, paths, g).items())
    return out


def take(zk, cluster: str, pool: ThreadPoolExecutor) -> Snapshot:
    brokers = members(zk, cluster)
    list(pool.map(_scrape, brokers))
    return Snapshot(time.monotonic(), brokers)
