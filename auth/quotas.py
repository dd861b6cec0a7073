"""What one user may make on a broker (pure): quotas and the book of what
each user uses.

A secured broker gives every user's clients the same bounds, so that one
user cannot exhaust the cluster for the others (20 heartbeats naming 50 new
groups each once made 2,000 topics and 1,000 group nodes; 3,000 share
groups each held a message for 12 h; 2,000 POPs were held on one
connection). The broker's defaults (``quota_*`` in its configuration) hold
for every user; a user's own (``duomq auth user add|update NAME --quota
KIND=N``, kept in its user node) replace them. Per user, on each broker:

  groups        consumer groups its clients use (a heartbeat naming them, a
                send back, an offset commit): what makes group nodes in
                ZooKeeper and retry and dead-letter topics
  share_groups  share groups it pops from (each keeps state in the share log)
  held_pops     its POPs held at once, waiting for messages
  open_transactions  its transactions' half messages not ended yet
  clients       client ids its heartbeats name (the broker tracks 100,000 in
                all: one user filling the table shut every other user out)
  connections   its connections that sent a request (each one's answers,
                held pulls and POPs are kept apart by the broker)

A name a user stops using for ``USE_TTL_S`` no longer counts (a connection
closed counts until then). The broker's
own key and an unsecured broker count nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from duomq.common.errors import ConfigError, QuotaExceededError

USE_TTL_S = 120.0            # a group a user has not used this long stops counting
KINDS = {"groups": "consumer groups", "share_groups": "share groups",
         "held_pops": "POPs held at once", "open_transactions": "transactions open",
         "clients": "client ids heard", "connections": "connections"}


@dataclass(frozen=True)
class Quotas:
    groups: int = 100
    share_groups: int = 100
    held_pops: int = 1000
    open_transactions: int = 10_000
    clients: int = 1000
    connections: int = 1000

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"quota {f.name}: {value!r} is not a count >= 0")

    def over(self, mine: dict[str, int]) -> Quotas:
        """These quotas with a user's own in place of the defaults."""
        unknown = sorted(set(mine) - set(KINDS))
        if unknown:
            raise ConfigError(f"quota {', '.join(unknown)}: not a quota (quotas: "
                              f"{', '.join(KINDS)})")
        return Quotas(**{**{f.name: getattr(self, f.name) for f in fields(self)}, **mine})


def parse(texts: list[str]) -> dict[str, int]:
    """``["groups=50", "held_pops=10"]`` as a user's own quotas."""
    out: dict[str, int] = {}
    for text in texts:
        kind, sep, value = text.partition("=")
        if not sep or kind not in KINDS:
            raise ConfigError(f"--quota {text!r}: expected KIND=N with KIND one of "
                              f"{', '.join(KINDS)}")
        try:
            n = int(value)
        except ValueError:
            raise ConfigError(f"--quota {text!r}: {value!r} is not a count") from None
        if n < 0:
            raise ConfigError(f"--quota {text!r}: a count is >= 0")
        out[kind] = n
    return out


class UsageBook:
    """What each user uses now, by kind: name -> when last used (monotonic s)."""

    def __init__(self):
        self._used: dict[tuple[str, str], dict[str, float]] = {}

    def admit(self, user: str, kind: str, name: str, limit: int, now: float) -> None:
        """Count ``name`` as used by ``user``, or raise QuotaExceededError
        when it is new and the user's ``limit`` of that kind is used up."""
        used = self._used.setdefault((user, kind), {})
        if name not in used:
            for n in [n for n, at in used.items() if now - at > USE_TTL_S]:
                del used[n]
            if len(used) >= limit:
                what = "a new one" if kind == "connections" else repr(name)
                raise QuotaExceededError(
                    f"user {user!r} uses {len(used)} {KINDS[kind]} on this broker, its quota "
                    f"{kind} ({limit}): {what} is refused (stop using some, or an admin "
                    f"raises it: duomq auth user update {user} --quota {kind}=N)")
        used[name] = now

    def count(self, user: str, kind: str, now: float) -> int:
        used = self._used.get((user, kind), {})
        return sum(1 for at in used.values() if now - at <= USE_TTL_S)

    def expire(self, now: float) -> None:
        """Forget what was not used for ``USE_TTL_S`` (housekeeping)."""
        for key in list(self._used):
            used = self._used[key]
            for n in [n for n, at in used.items() if now - at > USE_TTL_S]:
                del used[n]
            if not used:
                del self._used[key]
