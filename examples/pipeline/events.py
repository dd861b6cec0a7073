"""Shop events and what a correct pipeline must compute from them (pure).

An event is one JSON object: ``{"type": "click"|"order", "user": "u0042",
"item": "sku-07", "country": "DE", "amount_cents": 1299, "ts": 1763800000000}``
where ``ts`` is the event time in ms (a click has amount 0). Sent with the
type as tag and the user as key, so a consumer can filter orders by tag and
find a user's events by key.
"""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from dataclasses import dataclass

COUNTRIES = ("DE", "FR", "US", "JP", "BR")
ITEMS = tuple(f"sku-{i:02d}" for i in range(20))
MINUTE_MS = 60_000


@dataclass(frozen=True, slots=True)
class Event:
    type: str
    user: str
    item: str
    country: str
    amount_cents: int
    ts: int

    def encode(self) -> bytes:
        return json.dumps({"type": self.type, "user": self.user, "item": self.item,
                           "country": self.country, "amount_cents": self.amount_cents,
                           "ts": self.ts}, separators=(",", ":")).encode()


def generate(start_ms: int, minutes: int, per_minute: int, seed: int = 7,
             jitter_ms: int = 15_000) -> list[Event]:
    """``per_minute`` events for each of ``minutes`` minutes from ``start_ms``
    (a minute boundary), one order in ten. Event times are shuffled by up to
    ``jitter_ms`` within their minute's neighbourhood, the way events from
    many devices arrive a little out of order; the list is in send order."""
    if start_ms % MINUTE_MS:
        raise ValueError("start_ms must be on a minute boundary")
    rnd = random.Random(seed)
    out = []
    for m in range(minutes):
        base = start_ms + m * MINUTE_MS
        for i in range(per_minute):
            nominal = base + i * MINUTE_MS // per_minute
            ts = min(max(nominal + rnd.randint(-jitter_ms, jitter_ms), start_ms),
                     start_ms + minutes * MINUTE_MS - 1)
            order = rnd.random() < 0.1
            out.append(Event("order" if order else "click", f"u{rnd.randrange(5000):04d}",
                             rnd.choice(ITEMS), rnd.choice(COUNTRIES),
                             rnd.randrange(500, 20_000) if order else 0, ts))
    return out


@dataclass(frozen=True)
class MinuteFigures:
    clicks: int = 0
    orders: int = 0
    revenue_cents: int = 0


def per_minute(events) -> dict[int, MinuteFigures]:
    """Clicks, orders and revenue per minute of event time (key: the
    minute's start in ms), what the streaming job must write."""
    acc = defaultdict(lambda: [0, 0, 0])
    for e in events:
        a = acc[e.ts - e.ts % MINUTE_MS]
        if e.type == "order":
            a[1] += 1
            a[2] += e.amount_cents
        else:
            a[0] += 1
    return {m: MinuteFigures(*a) for m, a in sorted(acc.items())}


def per_country(events) -> dict[str, tuple[int, int, int]]:
    """(clicks, orders, revenue) per country, what the daily report must show."""
    clicks = Counter(e.country for e in events if e.type == "click")
    orders = Counter(e.country for e in events if e.type == "order")
    revenue = Counter()
    for e in events:
        revenue[e.country] += e.amount_cents
    return {c: (clicks[c], orders[c], revenue[c]) for c in sorted(set(clicks) | set(orders))}


def closed_minutes(max_event_ts: int, watermark_ms: int) -> int:
    """The start of the first minute a watermark of ``watermark_ms`` behind
    ``max_event_ts`` has not closed yet: every earlier minute is final."""
    wm = max_event_ts - watermark_ms
    return wm - wm % MINUTE_MS
