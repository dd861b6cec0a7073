import pytest

from duomq.cli.common import parse_time
from duomq.common.config import BrokerConfig, parse_settings
from duomq.common.delay import parse_levels
from duomq.common.duration import parse_ms
from duomq.common.errors import ConfigError


@pytest.mark.parametrize(("text", "ms"), [("500ms", 500), ("5s", 5000), ("2m", 120_000),
                                          ("1h", 3_600_000), ("1d", 86_400_000), (" 3s ", 3000)])
def test_durations(text, ms):
    assert parse_ms(text) == ms


@pytest.mark.parametrize("text", ["", "5", "s", "1.5s", "5 s", "-5s", "5w", "5S"])
def test_what_is_not_a_duration_is_refused_by_name(text):
    with pytest.raises(ValueError, match="is not a duration such as"):
        parse_ms(text)


def test_delay_levels_and_times_ago_read_durations_the_same_way():
    assert parse_levels("500ms 1s 2m") == (500, 1000, 120_000)
    assert parse_time("90s", now_ms=100_000) == 10_000
    assert parse_time("-1d", now_ms=86_400_000) == 0
    with pytest.raises(ConfigError):
        parse_levels("1s 0s")


def test_set_takes_values_as_the_environment_does():
    got = parse_settings(BrokerConfig, ["port=10911", "sync_replicas=2", "allow_lagging_promotion=true",
                                        "flush=SYNC_FLUSH"])
    assert got == {"port": 10911, "sync_replicas": 2, "allow_lagging_promotion": True,
                   "flush": "SYNC_FLUSH"}
    with pytest.raises(ConfigError, match="--set allow_lagging_promotion: 'maybe' is not a valid bool"):
        parse_settings(BrokerConfig, ["allow_lagging_promotion=maybe"])
    with pytest.raises(ConfigError, match="--set: unknown config field 'prot'"):
        parse_settings(BrokerConfig, ["prot=1"])
    with pytest.raises(ConfigError, match="--set: 'port' is not FIELD=VALUE"):
        parse_settings(BrokerConfig, ["port"])
    with pytest.raises(ConfigError, match="--set port: 'x' is not a valid int"):
        parse_settings(BrokerConfig, ["port=x"])
