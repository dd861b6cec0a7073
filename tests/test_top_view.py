"""``duomq top``'s rows from two snapshots (pure): rates from counter
deltas, a restarted broker's counters, topics and lag ordered, a group
without a master called out."""

from duomq.cli.top.snapshot import Broker, Snapshot, parse
from duomq.cli.top.view import build
from duomq.common.role import Role
from duomq.coordinator.nodes import MemberNode

MASTER = """
duomq_messages_in_total{topic="Orders"} %d
duomq_messages_in_total{topic="Clicks"} %d
duomq_messages_out_total{topic="Orders",consumer_group="billing"} %d
duomq_in_sync_replicas 1
duomq_consumer_lag_messages{topic="Orders",consumer_group="billing"} %d
duomq_consumer_lag_messages{topic="Clicks",consumer_group="stats"} 3
duomq_consumer_lag_latency_seconds{topic="Orders",consumer_group="billing"} 2.5
duomq_commitlog_bytes 1048576
duomq_disk_free_bytes 25
duomq_disk_total_bytes 100
duomq_replication_connections 1
duomq_timers_pending{topic="Orders"} 7
duomq_timers_pending{topic="Reminders"} 12
"""
SLAVE = """
duomq_replication_lag_bytes{slave_id="1",seen_by="slave"} 2048
duomq_replication_lag_seconds 0.02
duomq_replication_links_lost_total 3
"""


def snap(at, orders, clicks, out, lag, slave_role=Role.SLAVE):
    return Snapshot(at, [
        Broker("broker-a", 0, MemberNode(0, role=Role.MASTER, epoch=3, address="tcp://m:10911"),
               parse(MASTER % (orders, clicks, out, lag))),
        Broker("broker-a", 1, MemberNode(1, role=slave_role, epoch=3, address="tcp://s:10911"),
               parse(SLAVE)),
        Broker("broker-b", 0, MemberNode(0, role=Role.SLAVE, epoch=1),
               error="scrape failed: refused"),
    ])


def test_rates_and_rows():
    v = build(snap(10.0, 1000, 100, 500, 40), snap(12.0, 3000, 300, 1500, 70))
    master, slave, dead = v.brokers
    assert (master.role, master.epoch, master.in_rate, master.out_rate, master.in_sync) == \
        ("MASTER", 3, 1100.0, 500.0, 1)
    assert master.disk_free == 0.25 and master.log_bytes == 1048576 and master.lag_bytes is None
    assert (slave.lag_bytes, slave.lag_s, slave.in_sync, slave.in_rate) == (2048, 0.02, None, 0.0)
    assert dead.error == "scrape failed: refused"
    assert (master.links_open, master.links_lost, slave.links_open, slave.links_lost) == \
        (1, None, None, 3)
    assert (dead.links_open, dead.links_lost) == (None, None)
    assert [(t.topic, t.in_rate, t.stored, t.timers) for t in v.topics] == \
        [("Orders", 1000.0, 3000, 7), ("Clicks", 100.0, 300, 0), ("Reminders", None, 0, 12)]
    assert [(r.topic, r.group, r.lag, r.age_s, r.out_rate) for r in v.lags] == \
        [("Orders", "billing", 70, 2.5, 500.0), ("Clicks", "stats", 3, 0.0, 0.0)]
    assert v.groups_without_master == ["broker-b"]


def test_first_frame_has_no_rates_and_a_restart_counts_from_zero():
    v = build(None, snap(10.0, 1000, 100, 500, 40))
    assert v.brokers[0].in_rate is None and v.topics[0].in_rate is None
    assert v.lags[0].out_rate is None
    v = build(snap(10.0, 5000, 100, 500, 40), snap(11.0, 200, 100, 500, 40))
    assert v.brokers[0].in_rate == 300.0      # counters went down (a restart): 200 + 100 since


def test_top_n():
    v = build(None, snap(10.0, 1, 2, 0, 1), top=1)    # (Reminders: timers, nothing stored)
    assert [t.topic for t in v.topics] == ["Clicks"] and len(v.lags) == 1


def test_the_docs_describe_every_column_of_the_screen_in_its_order():
    """docs/operations/watching.md has one row per column of each table,
    named as the screen names it: a column added or renamed fails here
    until the page says what it shows."""
    import pathlib
    import re

    from duomq.cli.top import render
    page = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "operations"
            / "watching.md").read_text()
    for title, columns in (("Brokers", render.BROKER_COLUMNS),
                           ("Top topics", render.TOPIC_COLUMNS),
                           ("Consumer groups by lag", render.LAG_COLUMNS)):
        section = page.split(f"### {title}\n", 1)[1].split("\n### ", 1)[0]
        named = re.findall(r"^\| `([^`]+)` \|", section, re.M)
        assert tuple(named) == columns, (title, named)
