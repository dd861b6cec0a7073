"""Is a broker ready to be in service? (pure)

Readiness is what a Kubernetes readiness probe asks (``duomq health
--ready``), and through the PodDisruptionBudget what a node drain waits for:
a slave that is not in sync is not ready, so its master's node is not
drained until it is. Liveness is only "the process answers on its ports";
it never depends on ZooKeeper, so a ZooKeeper outage restarts no broker.
"""

from __future__ import annotations

from dataclasses import dataclass

from duomq.common.role import Role


@dataclass(frozen=True)
class BrokerHealth:
    role: Role
    following: bool            # a slave: replication from its master has started
    lease_valid: bool          # a master: its ZooKeeper lease allows writes
    acks_without_lease: bool   # a master: acks what its in-sync set holds while the lease lapses
    draining: bool             # a master handing over (planned switchover)
    epoch: int
    lag_bytes: int             # a slave: its master's end minus its own
    master_silent_s: float     # a slave: since its master was last heard; -1: never
    cannot_write: str = ""     # its store refuses writes (a full disk): why


def readiness(h: BrokerHealth, ha_max_gap_bytes: int, ha_housekeeping_s: float) -> tuple[bool, str]:
    """(ready, why): a master that may take writes; a slave that follows a
    master it heard from lately and is within ``ha_max_gap_bytes`` of it;
    neither while its store cannot write (a full disk)."""
    if h.cannot_write:
        role = "master" if h.role == Role.MASTER else "slave"
        return False, f"{role} at epoch {h.epoch} whose store cannot write: {h.cannot_write}"
    if h.role == Role.MASTER:
        if h.draining:
            return False, f"master at epoch {h.epoch}, handing over to a slave"
        if not h.lease_valid and not h.acks_without_lease:
            return False, (f"master at epoch {h.epoch} whose ZooKeeper lease lapsed: "
                           f"not accepting writes")
        if not h.lease_valid:
            return True, (f"master at epoch {h.epoch} whose ZooKeeper lease lapsed: acking "
                          f"what every slave of its in-sync set holds")
        return True, f"master at epoch {h.epoch}"
    if not h.following:
        return False, "no role yet: waiting for the group's election"
    if h.master_silent_s < 0:
        return False, "slave that has not heard from its master yet"
    if h.master_silent_s > ha_housekeeping_s:
        return False, f"slave whose master has been silent for {h.master_silent_s:.1f} s"
    if h.lag_bytes > ha_max_gap_bytes:
        return False, (f"slave {h.lag_bytes} bytes behind its master (in sync within "
                       f"{ha_max_gap_bytes})")
    return True, f"slave at epoch {h.epoch}, {h.lag_bytes} bytes behind its master"
