"""The example pipeline (examples/pipeline): its pure parts, and the whole of
it against a real master and slave, as `make demo` runs it."""

import os
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))

from pipeline import events as ev
from pipeline import run as pipeline_run

START = 1_763_800_000_000 // ev.MINUTE_MS * ev.MINUTE_MS


def test_events_stay_inside_their_span_and_are_reproducible():
    a = ev.generate(START, 5, 300, seed=3)
    assert a == ev.generate(START, 5, 300, seed=3)
    assert len(a) == 1500
    assert all(START <= e.ts < START + 5 * ev.MINUTE_MS for e in a)
    assert {e.type for e in a} == {"click", "order"}
    assert all((e.amount_cents > 0) == (e.type == "order") for e in a)


def test_generate_refuses_a_start_off_a_minute_boundary():
    with pytest.raises(ValueError, match="minute boundary"):
        ev.generate(START + 1, 1, 10)


def test_per_minute_and_per_country_figures():
    es = [ev.Event("click", "u1", "sku-00", "DE", 0, START + 5),
          ev.Event("order", "u1", "sku-00", "DE", 1200, START + 59_999),
          ev.Event("order", "u2", "sku-01", "FR", 300, START + 60_000)]
    assert ev.per_minute(es) == {START: ev.MinuteFigures(1, 1, 1200),
                                 START + 60_000: ev.MinuteFigures(0, 1, 300)}
    assert ev.per_country(es) == {"DE": (1, 1, 1200), "FR": (0, 1, 300)}


def test_closed_minutes_follow_the_watermark():
    # max event time 10:30.5, watermark 2 min: 08:30.5, so minutes before 08:00 are closed
    assert ev.closed_minutes(START + 10 * 60_000 + 30_500, 120_000) == START + 8 * 60_000
    assert ev.closed_minutes(START + 3 * 60_000, 120_000) == START + 60_000


def test_json_encoding_round_trips():
    import json
    e = ev.Event("order", "u7", "sku-03", "JP", 999, START)
    assert json.loads(e.encode()) == {"type": "order", "user": "u7", "item": "sku-03",
                                      "country": "JP", "amount_cents": 999, "ts": START}


@pytest.mark.integration
def test_the_pipeline_computes_what_was_produced(spark, local_cluster, tmp_path, capsys):
    local_cluster.add_broker("broker-a", 0, replication="SYNC")
    local_cluster.add_broker("broker-a", 1, replication="SYNC")
    local_cluster.create_topic("ShopEvents", 4)
    start = (int(time.time() * 1000) // ev.MINUTE_MS - 12) * ev.MINUTE_MS
    ok = pipeline_run.run(spark, local_cluster.zookeeper, local_cluster.cluster, "ShopEvents",
                          str(tmp_path / "pipeline"), span_minutes=12, per_min=300,
                          start_ms=start)
    out = capsys.readouterr().out
    assert ok, out
    # checked again here, from the events the run must have produced
    want = ev.per_minute(ev.generate(start, 12, 300))
    rows = spark.read.parquet(str(tmp_path / "pipeline" / "minutes")).collect()
    got = {int(r.minute.timestamp() * 1000): ev.MinuteFigures(r.clicks, r.orders, r.revenue_cents)
           for r in rows}
    # the last event is in minute 11, the watermark 2 minutes behind: minutes 0-8 are final
    assert len(rows) == 9
    assert got == {m: f for m, f in want.items() if m < start + 9 * ev.MINUTE_MS}
