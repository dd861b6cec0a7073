"""Per-user quotas (pure): what a user's own replace, how use is counted
and forgotten."""

import pytest

from duomq.auth.quotas import USE_TTL_S, Quotas, UsageBook, parse
from duomq.common.errors import ConfigError, QuotaExceededError


def test_a_user_is_refused_its_next_new_name_at_its_limit_and_names_in_use_stay_free():
    book = UsageBook()
    for g in ("a", "b", "c"):
        book.admit("u", "groups", g, 3, now=0.0)
    book.admit("u", "groups", "a", 3, now=1.0)               # in use: no new one
    with pytest.raises(QuotaExceededError, match=r"user 'u' uses 3 consumer groups on this "
                                                 r"broker, its quota groups \(3\): 'd'"):
        book.admit("u", "groups", "d", 3, now=2.0)
    book.admit("other", "groups", "d", 3, now=2.0)           # another user's own count
    book.admit("u", "share_groups", "d", 3, now=2.0)         # another kind's
    assert book.count("u", "groups", 2.0) == 3
    # a name not used for the TTL stops counting: room again
    book.admit("u", "groups", "a", 3, now=USE_TTL_S)
    book.admit("u", "groups", "d", 3, now=USE_TTL_S + 1.5)   # b and c went silent
    assert book.count("u", "groups", USE_TTL_S + 1.5) == 2
    book.expire(3 * USE_TTL_S)
    assert book.count("u", "groups", 3 * USE_TTL_S) == 0
    with pytest.raises(QuotaExceededError):
        book.admit("z", "groups", "x", 0, now=0.0)            # a quota of 0: none at all


def test_a_users_own_quotas_replace_the_defaults_and_bad_ones_are_named():
    assert Quotas().over({"groups": 5}) == Quotas(groups=5)
    assert parse(["groups=5", "held_pops=0"]) == {"groups": 5, "held_pops": 0}
    for text, error in (("groups", "expected KIND=N"), ("topics=3", "expected KIND=N"),
                        ("groups=x", "is not a count"), ("groups=-1", "a count is >= 0")):
        with pytest.raises(ConfigError, match=error):
            parse([text])
    with pytest.raises(ConfigError, match="not a quota"):
        Quotas().over({"topics": 3})
    with pytest.raises(ConfigError, match="is not a count"):
        Quotas(groups=-1)


def test_a_connection_past_the_quota_is_refused_without_naming_its_routing_id():
    book = UsageBook()
    for identity in ("00a1", "00a2"):
        book.admit("u", "connections", identity, 2, 0.0)
    book.admit("u", "connections", "00a1", 2, 1.0)               # in use: free
    with pytest.raises(QuotaExceededError) as refused:
        book.admit("u", "connections", "00a3", 2, 2.0)
    text = str(refused.value)
    assert "uses 2 connections" in text and "quota connections (2)" in text
    assert "a new one is refused" in text and "00a3" not in text
    assert Quotas().connections == 1000
    book.admit("u", "connections", "00a3", 2, 2.0 + USE_TTL_S + 1)   # the others closed
