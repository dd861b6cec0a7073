"""Where a pull should go next (pure). RocketMQ sends a consumer to a slave
when the bytes from its position to the end of the log exceed a share of
physical memory; we use the page-cache residency of the pull position when
it is known (a cold read hurts the master's producers whatever the ratio),
and keep the ratio as the rule when it is not. The slave sends the consumer
back below a lower ratio (hysteresis). Advice expires. ``residency`` probes
the page cache (mincore) for the master's rule."""

from __future__ import annotations

from duomq.store.residency import resident_fraction

COLD = 0.5                   # less than half of the window's pages cached: a cold read
ADVICE_MIN_BEHIND = 4 << 20  # the master gives no advice this close to the end (it is hot)
HOT_TAIL = 2 * ADVICE_MIN_BEHIND  # a slave sends readers back only this close: never bounced
PROBE_BYTES = 64 << 10       # the page-cache windows probed for a pull
# A sequential reader's next position is usually cached by the kernel's
# readahead even deep in a cold backlog (this machine's disk reads 8 MiB
# ahead), so a second window is probed this far past the pull position.
PROBE_AHEAD = 16 << 20


def master_says_go_to_slave(behind_bytes: int, total_memory: int, max_ratio: float,
                            resident: float | None, slave_in_sync: bool) -> bool:
    if not slave_in_sync or behind_bytes <= 0:
        return False
    if resident is not None:
        return resident < COLD
    return behind_bytes > max_ratio * total_memory


def slave_says_go_back(behind_bytes: int, total_memory: int, back_ratio: float,
                       master_alive: bool) -> bool:
    """Back below ``back_ratio`` of memory, and only within the hot tail, where
    the master will not send the reader straight back (its residency rule may
    have sent it here whatever the ratio)."""
    return master_alive and behind_bytes < min(back_ratio * total_memory, HOT_TAIL)


def residency(mfq, phys: int, behind: int) -> float | None:
    """The lower page-cache residency of the commit-log window at ``phys``
    and of the one ``PROBE_AHEAD`` past it (when the log reaches that far);
    None when it cannot be told. ``mfq``: the commit log's segments."""
    probes = [phys] + ([phys + PROBE_AHEAD] if behind > PROBE_AHEAD + PROBE_BYTES else [])
    fractions = []
    for at in probes:
        seg = mfq.find(at)
        if seg is not None:
            f = resident_fraction(seg.fd, at - seg.base, min(PROBE_BYTES, seg.end - at))
            if f is not None:
                fractions.append(f)
    return min(fractions) if fractions else None
