"""Options every subcommand takes, and output helpers."""

from __future__ import annotations

import json
import os
import sys

from duomq.common import duration
from duomq.common.endpoint import (
    DEFAULT_CLUSTER,
    DEFAULT_ZOOKEEPER,
    default_dev_dir,
    read_dev_state,
)


def add_endpoint(p) -> None:
    p.add_argument("--zookeeper", help="ZooKeeper host:port[,...][/chroot] "
                   "(default: $DUOMQ_ZOOKEEPER, else the local dev cluster)")
    p.add_argument("--cluster", help="cluster name (default: $DUOMQ_CLUSTER, else the dev "
                   "cluster's, else DefaultCluster)")
    p.add_argument("--credentials", metavar="PATH",
                   help="a secured cluster: your credentials file (default: "
                        "$DUOMQ_CREDENTIALS; `duomq auth user add` writes one)")


def add_metrics_port(p) -> None:
    p.add_argument("--metrics-port", type=int, default=-1, metavar="PORT",
                   help="serve Prometheus metrics on http://0.0.0.0:PORT/metrics while running "
                        "(0: a free port, printed on stderr; default: none)")


def say_metrics(client) -> None:
    """The client's metrics address, on stderr (stdout may be data)."""
    if client.metrics_url:
        print(f"metrics on {client.metrics_url}", file=sys.stderr, flush=True)


def add_json(p) -> None:
    p.add_argument("--json", action="store_true", help="print JSON")


def endpoint(args) -> tuple[str, str]:
    """--zookeeper/--cluster, then the environment, then the local dev cluster.
    ``--credentials`` goes to every client the command makes (through
    ``$DUOMQ_CREDENTIALS``, which clients read)."""
    if getattr(args, "credentials", None):
        os.environ["DUOMQ_CREDENTIALS"] = args.credentials
    zk = args.zookeeper or os.environ.get("DUOMQ_ZOOKEEPER")
    cluster = args.cluster or os.environ.get("DUOMQ_CLUSTER")
    state = read_dev_state(getattr(args, "data_dir", None) or default_dev_dir()) \
        if not (zk and cluster) or not os.environ.get("DUOMQ_CREDENTIALS") else None
    if state:
        zk = zk or state["zookeeper"]
        cluster = cluster or state["cluster"]
        admin = state.get("credentials", {}).get("admin")
        if admin and not os.environ.get("DUOMQ_CREDENTIALS") and \
                (zk, cluster) == (state["zookeeper"], state["cluster"]):
            os.environ["DUOMQ_CREDENTIALS"] = admin     # a secured dev cluster: its admin
    return zk or DEFAULT_ZOOKEEPER, cluster or DEFAULT_CLUSTER


def parse_time(text: str, now_ms: int | None = None) -> int:
    """A point in time as epoch milliseconds, from epoch milliseconds
    (``1763800000000``), ISO 8601 (``2026-11-22T10:00``, local time unless it
    names a zone) or a time ago (``30m``, ``2h``, ``1d``, ``45s``; a leading
    ``-`` is allowed)."""
    import datetime
    import time
    t = text.strip()
    if t.isdigit():
        return int(t)
    try:
        ago = duration.parse_ms(t[1:] if t.startswith("-") else t)
    except ValueError:
        pass
    else:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        return now - ago
    try:
        return int(datetime.datetime.fromisoformat(t).timestamp() * 1000)
    except ValueError:
        raise ValueError(f"not a time: {text!r} (epoch ms, ISO 8601 such as "
                         f"2026-11-22T10:00:00, or a time ago such as 30m)") from None


def time_arg(text: str) -> int:
    """argparse type for a time (see parse_time)."""
    import argparse
    try:
        return parse_time(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def emit(obj) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def table(rows: list[list], header: list[str]) -> str:
    rows = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*header)] + [fmt.format(*r) for r in rows])


def message_json(m) -> dict:
    """A received message as JSON (a body that is not UTF-8 in base64)."""
    import base64
    out = {"msg_id": m.msg_id, "topic": m.topic, "group": m.broker_group, "queue": m.queue_id,
           "queue_offset": m.queue_offset, "tags": m.tags, "keys": m.keys,
           "store_timestamp_ms": m.store_timestamp_ms, "properties": m.properties}
    try:
        out["body"] = m.body.decode()
    except UnicodeDecodeError:
        out["body_base64"] = base64.b64encode(m.body).decode()
    return out
