"""What Spark's Kafka source reports per batch in its progress ``metrics``
(``minOffsetsBehindLatest``, ``maxOffsetsBehindLatest``,
``avgOffsetsBehindLatest``), for duomq sources.

Spark 4.3 gives Python data sources no way to add metrics to a query's
progress (``PythonMicroBatchStream`` does not implement Spark's
``ReportsSourceMetrics``), so the figures are computed from what the
progress does carry: each duomq source's ``endOffset`` (where the batch
ended) and ``latestOffset`` (what was available, ``reportLatestOffset``).
With ZooKeeper given, the lag of each slave the query reads (its member
node's ``lag_ms``, refreshed every second) is added as ``replicaLagMs``.
"""

from __future__ import annotations

import json
from typing import Any

from duomq.client.spark.options import flatten


def _field(obj, name: str):
    """A field of a progress as a dict (JSON) or as PySpark's objects."""
    if obj is None:
        return None
    try:
        return obj[name]
    except (KeyError, TypeError):
        return getattr(obj, name, None)


def _offsets(value) -> dict | None:
    if value is None:
        return None
    try:
        doc = json.loads(value) if isinstance(value, str) else value
        return flatten(doc)
    except (ValueError, TypeError, AttributeError):
        return None         # another source's offsets (not duomq's shape)


def source_metrics(progress: Any, zookeeper: str | None = None,
                   cluster: str | None = None) -> list[dict[str, Any]]:
    """Per duomq source of a ``StreamingQuery.lastProgress`` (or an element
    of ``recentProgress``): the Kafka source's offsets-behind metrics, and
    with ``zookeeper`` the replica lag of each broker group's slaves."""
    out: list[dict[str, Any]] = []
    for src in _field(progress, "sources") or []:
        # a duomq source is told by its offsets' shape: topic -> group -> queue -> offset
        end = _offsets(_field(src, "endOffset"))
        latest = _offsets(_field(src, "latestOffset"))
        if end is None or latest is None:
            continue
        behind = [max(0, latest[k] - end.get(k, 0)) for k in latest]
        m: dict[str, Any] = {
            "minOffsetsBehindLatest": min(behind, default=0),
            "maxOffsetsBehindLatest": max(behind, default=0),
            "avgOffsetsBehindLatest": sum(behind) / len(behind) if behind else 0.0}
        if zookeeper:
            m["replicaLagMs"] = replica_lags(zookeeper, cluster, sorted({g for _t, g, _q in latest}))
        out.append(m)
    return out


def replica_lags(zookeeper: str, cluster: str | None, groups: list[str]) -> dict[str, int]:
    """``group/broker id`` -> each live slave's lag behind its master (ms; -1:
    not caught up since it started), from the slaves' member nodes."""
    from duomq.client.cluster.members import BrokerMembers
    from duomq.common.endpoint import DEFAULT_CLUSTER
    from duomq.coordinator import zk as zkutil
    zk = zkutil.connect(zookeeper)
    members = BrokerMembers(zk, cluster or DEFAULT_CLUSTER)
    try:
        return {f"{g}/{bid}": m.lag_ms for g in groups
                for bid, m in sorted(members.of(g).items()) if not m.is_master}
    finally:
        members.close()
        zkutil.close(zk)
