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

from duomq.transport.dealer import CLOSED, ZmtpDealer


def not_opening(socks: Iterable[ZmtpDealer], now: float, connect_s: float) -> list[ZmtpDealer]:
    """Connections still being opened ``connect_s`` after their dial."""
    return [s for s in socks
            if s.state != CLOSED and not s.is_open and now - s.dialled_at > connect_s]


def silent(socks: Iterable, now: float, connect_s: float) -> list[ZmtpDealer]:
    """Of the sockets a timed-out request used, the open native ones that
    heard nothing for ``connect_s``."""
    return [s for s in set(socks)
            if isinstance(s, ZmtpDealer) and s.is_open and now - s.heard_at > connect_s]
