"""``duomq top``: the cluster live, refreshed every second (``--once``: one
frame on stdout, after two looks so that rates are known). Per broker: role,
epoch, messages in and out a second, a master's slaves in sync, a slave's
replication lag (bytes and age), the log's size, disk free, the log's tail in
the page cache, and its replication links (``links``: a master's open
connections from slaves, a slave's links lost and dialled again since it
started); then the busiest topics and the consumer groups furthest behind.
docs/operations/watching.md shows a frame and says where each column comes
from."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from rich.console import Console
from rich.live import Live

from duomq.cli.common import add_endpoint, endpoint
from duomq.cli.top import render, snapshot, view
from duomq.coordinator import zk as zkutil


def add(sub) -> None:
    p = sub.add_parser("top", help="a live view of the cluster: roles, epochs, traffic, "
                                   "replication lag, topics and consumer lag")
    p.add_argument("--interval", type=float, default=1.0, metavar="SECONDS",
                   help="refresh this often (default 1)")
    p.add_argument("--top", type=int, default=10, metavar="N",
                   help="topics and consumer groups shown (default 10)")
    p.add_argument("--once", action="store_true",
                   help="print one frame and exit (rates over one interval)")
    add_endpoint(p)
    p.set_defaults(func=run)


def run(args) -> int:
    zookeeper, cluster = endpoint(args)
    interval = max(0.1, args.interval)
    zk = zkutil.connect(zookeeper)
    pool = ThreadPoolExecutor(8, thread_name_prefix="duomq-top")
    try:
        prev = snapshot.take(zk, cluster, pool)
        if args.once:
            time.sleep(interval)
            cur = snapshot.take(zk, cluster, pool)
            Console().print(render.screen(view.build(prev, cur, args.top), cluster, zookeeper,
                                          interval))
            return 0
        frame = render.screen(view.build(None, prev, args.top), cluster, zookeeper, interval)
        with Live(frame, screen=True, auto_refresh=False) as live:
            while True:
                time.sleep(interval)
                cur = snapshot.take(zk, cluster, pool)
                live.update(render.screen(view.build(prev, cur, args.top), cluster,
                                          zookeeper, interval), refresh=True)
                prev = cur
    except KeyboardInterrupt:
        return 0
    finally:
        pool.shutdown(wait=False)
        zkutil.close(zk)
