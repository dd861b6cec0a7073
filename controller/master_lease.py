"""The master's lease, as its slaves measure it (pure logic, no I/O).

A master renews its master node every ``renew_s`` (``master_lease_ms / 6``)
with a ZooKeeper write that also proves no later epoch exists
(``ha_controller``: a transaction creating and deleting the next epoch's
node, then setting the master node at the version it last wrote). Its slaves
do not wait for its ZooKeeper session to end to find it dead (Patroni keeps
a leader key with a TTL for the same reason): each reads the master node
every ``renew_s`` and presumes the master gone once the node has not changed
for ``master_lease_ms`` during which ZooKeeper answered it promptly.

Why two masters never ack at once. The master acks under its quorum rule
only until ``t0 + master_lease_ms / 2``, ``t0`` taken before it sent the
renewal that succeeded. A slave starts counting when a read that showed that
renewal *returned* (after the write was applied, so after ``t0``), and
claims only after ``master_lease_ms`` more, with a transaction that deletes
the master node at the version it saw: a renewal in between fails the claim.
A read that failed or took longer than ``renew_s`` restarts the count from
its end: while ZooKeeper is away or slow (an outage, an ensemble electing
its leader), nobody is presumed dead, and once it answers again the master
gets a whole lease to renew. A master paused past its lease wakes with its
lease expired, and its next renewal fails if a successor claimed meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass

NodeKey = tuple[int, int]       # (czxid, version): the master node as one renewal left it


@dataclass
class MasterSilence:
    """A slave's count of how long the master node has gone unrenewed while
    ZooKeeper answered this broker promptly. One thread writes (the probe
    loop), the HA cycle reads; a torn read only delays a decision."""
    lease_s: float
    prompt_s: float
    key: NodeKey | None = None    # the node as last seen (None: absent or not read yet)
    since: float | None = None    # when the count began (None: not counting)
    answering_since: float | None = None   # ZooKeeper has answered promptly since then

    def probed(self, key: NodeKey | None, started: float, ended: float) -> None:
        """A read of the master node that ran from ``started`` to ``ended``."""
        if ended - started > self.prompt_s:
            self.failed(ended)             # too slow to count as ZooKeeper answering
            return
        if self.answering_since is None:
            self.answering_since = ended
        if key != self.key or self.since is None:
            self.key, self.since = key, ended

    def failed(self, ended: float) -> None:
        """A read failed or took too long: count again from ``ended``."""
        self.since = ended
        self.answering_since = ended

    def unchanged_for(self, seen_since: float, now: float) -> float:
        """How long a node first seen as it is at ``seen_since`` has stayed
        so while ZooKeeper answered promptly (0 while it has not)."""
        if self.answering_since is None:
            return 0.0
        return max(0.0, now - max(seen_since, self.answering_since))

    def expired(self, key: NodeKey | None, now: float) -> bool:
        """The node as the cycle read it (``key``) is the one counted, and it
        has gone unrenewed for a whole lease of prompt answers."""
        return key is not None and key == self.key and self.since is not None \
            and now - self.since >= self.lease_s

    def remaining_s(self, now: float) -> float | None:
        """Seconds until the counted node expires (None: nothing counted)."""
        if self.key is None or self.since is None:
            return None
        return max(0.0, self.since + self.lease_s - now)


def master_ack_lease_s(lease_s: float) -> float:
    """How long after starting a renewal that succeeded a master acks under
    its quorum rule: half the lease its slaves wait, which leaves the other
    half for clock-rate drift and the renewal's own travel."""
    return lease_s / 2


def renew_period_s(lease_s: float) -> float:
    """How often the master renews and its slaves read the node."""
    return lease_s / 6
