"""common/grace.py: a pod's grace period shared out between the preStop
hand-over, the broker's own stop and a margin; a period too short for a
hand-over, or not a number, is a clear error."""

import pytest

from duomq.common.errors import ConfigError
from duomq.common.grace import (
    GRACE_ENV,
    MARGIN_S,
    MIN_HANDOVER_S,
    STOP_S,
    grace_from_env,
    handover_budget,
)


def test_the_hand_over_gets_what_the_stop_and_the_margin_leave():
    assert handover_budget(90) == 90 - STOP_S - MARGIN_S == 70
    shortest = MIN_HANDOVER_S + STOP_S + MARGIN_S
    assert handover_budget(shortest) == MIN_HANDOVER_S


def test_a_grace_period_too_short_to_hand_over_is_refused():
    with pytest.raises(ConfigError, match="at least 30 s"):
        handover_budget(29)


@pytest.mark.parametrize("raw,want", [("90", 90.0), (" 45.5 ", 45.5), ("", None)])
def test_the_grace_period_is_read_from_the_pods_environment(raw, want):
    assert grace_from_env({GRACE_ENV: raw}) == want
    assert grace_from_env({}) is None


@pytest.mark.parametrize("raw", ["ninety", "0", "-5"])
def test_a_grace_period_that_is_not_a_duration_is_refused(raw):
    with pytest.raises(ConfigError, match=GRACE_ENV):
        grace_from_env({GRACE_ENV: raw})
