"""Where a pull should go next (pure). RocketMQ sends a consumer to a slave
when the bytes from its position to the end of the log exceed a share of
physical memory; we use the page-cache residency of the pull position when
it is known (a cold read hurts the master's producers whatever the ratio),
and keep the ratio as the rule when it is not. The slave sends the consumer
back below a lower ratio (hysteresis). Advice expires. The residency comes
from ``store.residency.window_residency``."""

from __future__ import annotations

COLD = 0.5                   # less than half of the window's pages cached: a cold read
ADVICE_MIN_BEHIND = 4 << 20  # the master gives no advice this close to the end (it is hot)
HOT_TAIL = 2 * ADVICE_MIN_BEHIND  # a slave sends readers back only this close: never bounced


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

