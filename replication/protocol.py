"""Pure replication logic: the link state table, the confirmed offset and the
SYNC ack rule (``sync_replicas``, ``min_sync_replicas``)."""

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


def required_acks(in_sync: int, sync_replicas: int, min_sync_replicas: int) -> int | None:
    """How many slaves must hold a record before a SYNC master acks it, with
    ``in_sync`` slaves in sync: ``sync_replicas`` while that many are; while
    fewer but at least ``min_sync_replicas`` are, every one of them (the group
    is degraded; 0: the master alone); None below that (SLAVE_NOT_AVAILABLE).
    Kafka's acks=all with ``min.insync.replicas``."""
    if in_sync >= sync_replicas:
        return sync_replicas
    return in_sync if in_sync >= min_sync_replicas else None


def ack_point(in_sync_acked: list[int], isr_acked: list[int], end: int, sync_replicas: int,
              min_sync_replicas: int) -> int | None:
    """The offset a SYNC master may ack up to (None: too few slaves in sync).

    ``in_sync_acked``: what each slave in sync (by the links) holds;
    ``isr_acked``: what each slave of the *published* in-sync set last held;
    ``end``: the master's log end. With enough slaves in sync, the
    ``sync_replicas``-th highest holding. Degraded, the lowest holding of every
    slave in sync *and* of every slave still published in the in-sync set: a
    slave that dropped out is waited for until ZooKeeper no longer lists it, so
    a record acked without it can never be lost to its election (Kafka shrinks
    the ISR before it advances the high watermark without a replica)."""
    need = required_acks(len(in_sync_acked), sync_replicas, min_sync_replicas)
    if need is None:
        return None
    if need == sync_replicas:
        return confirmed_offset(in_sync_acked, sync_replicas)
    return min([*in_sync_acked, *isr_acked], default=end)


def in_sync(acked: int, master_max: int, max_gap: int) -> bool:
    """A slave is in sync while it is at most ``max_gap`` bytes behind."""
    return master_max - acked <= max_gap
