"""Pure replication logic: the link state table and the confirmed offset."""

from __future__ import annotations

import enum


class HaState(str, enum.Enum):
    """A replication link as the master sees it (RocketMQ's HAConnectionState)."""

    READY = "READY"            # socket up, nothing heard
    HANDSHAKE = "HANDSHAKE"    # first report: position known, nothing sent
    TRANSFER = "TRANSFER"      # streaming
    SUSPEND = "SUSPEND"        # silent past the heartbeat; not counted in sync
    SHUTDOWN = "SHUTDOWN"      # silent past ha_housekeeping_ms: forgotten


# transitions[state][event] -> state (the ZeroMQ guide's Binary Star style)
TRANSITIONS: dict[HaState, dict[str, HaState]] = {
    HaState.READY: {"report": HaState.HANDSHAKE, "timeout": HaState.SHUTDOWN},
    HaState.HANDSHAKE: {"report": HaState.TRANSFER, "sent": HaState.TRANSFER,
                        "silence": HaState.SUSPEND, "timeout": HaState.SHUTDOWN},
    HaState.TRANSFER: {"report": HaState.TRANSFER, "sent": HaState.TRANSFER,
                       "silence": HaState.SUSPEND, "timeout": HaState.SHUTDOWN},
    HaState.SUSPEND: {"report": HaState.TRANSFER, "timeout": HaState.SHUTDOWN,
                      "silence": HaState.SUSPEND},
    HaState.SHUTDOWN: {},
}


def next_state(state: HaState, event: str) -> HaState:
    return TRANSITIONS[state].get(event, state)


def confirmed_offset(acked: list[int], sync_replicas: int) -> int | None:
    """The offset held by at least ``sync_replicas`` slaves: the
    ``sync_replicas``-th highest acknowledged offset; None with too few slaves."""
    if sync_replicas <= 0:
        raise ValueError("sync_replicas must be positive")
    if len(acked) < sync_replicas:
        return None
    return sorted(acked, reverse=True)[sync_replicas - 1]


def in_sync(acked: int, master_max: int, max_gap: int) -> bool:
    """A slave is in sync while it is at most ``max_gap`` bytes behind."""
    return master_max - acked <= max_gap
