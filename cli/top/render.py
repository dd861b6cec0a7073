"""``duomq top``'s screen: rich tables from a ``View``."""

from __future__ import annotations

import time

from rich.console import Group
from rich.table import Table
from rich.text import Text

from duomq.cli.top.view import View
from duomq.common.role import Role

ROLE_STYLE = {Role.MASTER: "bold green", Role.SLAVE: "cyan"}
# the tables' columns (docs/operations/watching.md describes each)
BROKER_COLUMNS = ("group", "id", "role", "epoch", "address", "in", "out", "in-sync",
                  "repl lag", "lag age", "log", "disk free", "tail cached", "links")
TOPIC_COLUMNS = ("topic", "in", "stored", "timers")
LAG_COLUMNS = ("topic", "consumer group", "lag", "oldest", "out")


def size(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return "-"


def rate(r: float | None) -> str:
    return "-" if r is None else f"{r:,.0f}/s"


def frac(f: float | None) -> str:
    return "-" if f is None else f"{f * 100:.0f}%"


def seconds(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 0:
        return "not caught up"
    return f"{s * 1000:.0f} ms" if s < 1 else f"{s:.1f} s"


def links(open_now: int | None, lost: int | None) -> str:
    """A master's open replication connections, a slave's links lost."""
    if open_now is not None:
        return f"{open_now} open"
    return "-" if lost is None else f"{lost} lost"


def screen(view: View, cluster: str, zookeeper: str, interval_s: float) -> Group:
    head = Text.assemble(("duomq top", "bold"), f"  cluster {cluster}  zookeeper {zookeeper}  ",
                         time.strftime("%H:%M:%S"),
                         f"  every {interval_s:g} s  (Ctrl-C quits)")
    parts: list = [head]
    for g in view.groups_without_master:
        parts.append(Text(f"broker group {g} has no master", style="bold red"))
    t = Table(title="Brokers", title_justify="left", expand=False)
    for col in BROKER_COLUMNS:
        t.add_column(col, justify="right" if col in ("id", "epoch", "in", "out", "in-sync",
                                                     "repl lag", "log") else "left")
    for r in view.brokers:
        if r.error:
            t.add_row(r.group, str(r.broker_id), Text(r.role, ROLE_STYLE.get(r.role, "")),
                      str(r.epoch), r.address, Text(r.error, "red"), *[""] * 8)
            continue
        t.add_row(r.group, str(r.broker_id), Text(r.role, ROLE_STYLE.get(r.role, "")),
                  str(r.epoch), r.address, rate(r.in_rate), rate(r.out_rate),
                  "-" if r.in_sync is None else str(r.in_sync),
                  size(r.lag_bytes), seconds(r.lag_s), size(r.log_bytes), frac(r.disk_free),
                  frac(r.tail_cached), links(r.links_open, r.links_lost))
    parts.append(t)
    t = Table(title="Top topics", title_justify="left")
    for col in TOPIC_COLUMNS:
        t.add_column(col, justify="left" if col == "topic" else "right")
    for tr in view.topics:
        t.add_row(tr.topic, rate(tr.in_rate), f"{tr.stored:,.0f}",
                  f"{tr.timers:,.0f}" if tr.timers else "-")
    parts.append(t)
    t = Table(title="Consumer groups by lag", title_justify="left")
    for col in LAG_COLUMNS:
        t.add_column(col, justify="right" if col in ("lag", "out") else "left")
    for lr in view.lags:
        t.add_row(lr.topic, lr.group, f"{lr.lag:,.0f}", seconds(lr.age_s), rate(lr.out_rate))
    parts.append(t)
    return Group(*parts)
