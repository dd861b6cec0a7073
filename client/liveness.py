"""When a native connection of the client's I/O thread is given up and
dialled again (pure: the clock is passed in). A connect made while the
broker's port was cut stays in SYN_SENT and the kernel retries its SYN 1, 3,
7, 15 and 31 s after the dial; an open connection whose packets were
dropped waits out TCP's retransmission backoff once the cut heals. Either
way requests queue behind it long after the link is back (issue 68's
campaign: a 19.6 s cut of a master's client port, producers silent 60 s
after the heal; an 8 s cut, the first asynchronous ack 5.3 s after it). So,
as the blocking path drops its socket on a timeout: a connection not open
``connect_s`` after its dial, or silent that long when a request on it timed
out, is closed, failing what waits on it, and the next request dials again."""

from __future__ import annotations

from collections.abc import Iterable

from duomq.transport.links import Dealer


def not_opening(socks: Iterable[Dealer], now: float, connect_s: float) -> list[Dealer]:
    """Connections still being opened ``connect_s`` after their dial (a
    libzmq one never is: its connect timeout is libzmq's)."""
    return [s for s in socks if s.opening_for(now) > connect_s]


def silent(socks: Iterable[Dealer | None], now: float, connect_s: float) -> list[Dealer]:
    """Of the sockets a timed-out request used, the open ones that heard
    nothing for ``connect_s`` (a libzmq one never says)."""
    return [s for s in set(socks) if s is not None and s.silent_for(now) > connect_s]
