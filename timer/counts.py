"""How many timers each topic has pending, without a walk of the index:
per topic, the timers indexed (less those recalled) by the minute they come
due (RocketMQ 5's ``TimerMetrics`` keeps a count per topic the same way).

A topic's pending timers are those of the minutes from the one the wheel
fires in onward, less what fired of that minute since this master took it
over (a master that resumed mid-minute counts the minute's timers fired
before it as pending until the minute passes). Kept in the index's
checkpoint, so that it is as exact as what was indexed; memory is a count
per topic and minute ahead (at most ``timer_max_delay_ms`` of minutes),
nothing per timer. Pure: no I/O."""

from __future__ import annotations

import json
import zlib
from collections import defaultdict
from typing import Any

from duomq.format import native

BUCKET_MS = 60_000
KEEP_PAST_MS = 86_400_000       # minutes past kept this long (a master far behind)


class TimerCounts:
    def __init__(self) -> None:
        self.buckets: dict[str, dict[int, int]] = defaultdict(dict)   # topic -> minute -> n

    def add(self, topic: str, at: int, n: int = 1) -> None:
        """``n`` timers of ``topic`` due at ``at`` indexed (-1: one recalled)."""
        b = self.buckets[topic]
        minute = at // BUCKET_MS
        b[minute] = b.get(minute, 0) + n

    def add_many(self, topic: str, ats: list[int]) -> None:
        """One timer of ``topic`` indexed for each time of ``ats``."""
        b = self.buckets[topic]
        if _count_minutes(b, ats, BUCKET_MS) is not None:        # the C loop's
            return
        get = b.get
        for at in ats:
            minute = at // BUCKET_MS
            b[minute] = get(minute, 0) + 1

    def pending(self, through: int, fired: dict[str, int] | None = None) -> dict[str, int]:
        """Each topic's pending timers, the wheel having fired through
        ``through`` (ms) and ``fired`` (topic -> n) of its minute."""
        now = through // BUCKET_MS
        fired = fired or {}
        out = {}
        for topic, b in self.buckets.items():
            n = sum(c for m, c in b.items() if m >= now) - fired.get(topic, 0)
            if n > 0:
                out[topic] = n
        return out

    def prune(self, now_ms: int) -> None:
        """Forget minutes a day past (none is pending on any wheel that keeps up)."""
        old = (now_ms - KEEP_PAST_MS) // BUCKET_MS
        for topic in list(self.buckets):
            b = self.buckets[topic]
            for m in [m for m in b if m < old]:
                del b[m]
            if not b:
                del self.buckets[topic]

    def encode(self) -> bytes:
        return zlib.compress(json.dumps(
            {t: sorted(b.items()) for t, b in self.buckets.items() if b},
            separators=(",", ":")).encode())

    @classmethod
    def decode(cls, raw: bytes) -> TimerCounts:
        """From ``encode``'s bytes (ValueError: not that)."""
        try:
            obj = json.loads(zlib.decompress(raw))
            out = cls()
            for topic, pairs in obj.items():
                out.buckets[str(topic)] = {int(m): int(c) for m, c in pairs}
        except (zlib.error, ValueError, TypeError, AttributeError) as exc:
            raise ValueError(f"not timer counts: {exc}") from None
        return out


_count_minutes: Any = native.declined     # bound by _bind: the C loop, or declining all


@native.chosen
def _bind(loops: Any) -> None:
    global _count_minutes
    _count_minutes = loops.count_minutes if loops is not None else native.declined
