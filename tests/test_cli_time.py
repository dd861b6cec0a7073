"""Times the CLI takes (--begin, --end, --timestamp)."""

import datetime

import pytest

from duomq.cli.common import parse_time

NOW = 1_763_800_000_000


def test_epoch_ms_iso_and_time_ago():
    assert parse_time("1763800000123") == 1_763_800_000_123
    assert parse_time("2026-11-22T10:00:00+00:00") == int(
        datetime.datetime(2026, 11, 22, 10, tzinfo=datetime.UTC).timestamp() * 1000)
    local = datetime.datetime(2026, 11, 22, 10, 30)
    assert parse_time("2026-11-22T10:30") == int(local.timestamp() * 1000)
    assert parse_time("30m", NOW) == NOW - 30 * 60_000
    assert parse_time("-2h", NOW) == NOW - 2 * 3_600_000
    assert parse_time("1d", NOW) == NOW - 86_400_000
    assert parse_time(" 45s ", NOW) == NOW - 45_000


@pytest.mark.parametrize("bad", ["", "yesterday", "2h30m", "-", "12x", "2026-13-01"])
def test_bad_times_are_refused_with_the_forms_accepted(bad):
    with pytest.raises(ValueError, match="epoch ms, ISO 8601"):
        parse_time(bad)
