"""The broker's role and offsets: one object, written only by the serving
thread (other threads read single fields, which Python reads whole)."""

from __future__ import annotations

from dataclasses import dataclass

from duomq.common.role import Role


@dataclass
class BrokerState:
    role: Role = Role.SLAVE
    epoch: int = 0                 # the epoch led (master) or followed (slave)
    lease_until: float = 0.0       # monotonic; a master acks and takes writes only before it
    draining: bool = False         # a master handing over: no new writes
    drain_started: float = 0.0     # when (monotonic s): only reports since count
    stepping_down: bool = False    # handed over: not a candidate until it follows someone
    flushed_offset: int = 0        # the commit log is fsynced up to here
    replicated_offset: int = 0     # master: SYNC writes may be acked up to here (-1: too
                                   # few slaves in sync)
    in_sync_replicas: int = 0      # master: slaves that count for SYNC acks now
    visible_offset: int = 0        # consumers read up to here
    appended: bool = False         # a write since the flush service was last woken
    bad_requests: int = 0
    redirects: int = 0             # pulls answered with advice to read elsewhere

    @property
    def is_master(self) -> bool:
        return self.role == Role.MASTER

    def lease_valid(self, now: float) -> bool:
        return now < self.lease_until
