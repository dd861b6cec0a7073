"""What the HA controller orders the broker's serving thread to do, as typed
values (the controller decides in ``ha_cycle``; the serving loop carries the
orders out in ``broker.role_switch``). An order travels in the broker's inbox
(``broker.inbox``): a queue the loop drains, with an eventfd that only
wakes it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from duomq.common.role import Role


@dataclass(frozen=True)
class Promote:
    """Become master at ``epoch`` (the controller holds the master node,
    published the in-sync set ``isr`` and grants the term its first lease,
    ``lease_until``, monotonic s)."""
    epoch: int
    isr: frozenset[int] | None
    lease_until: float = 0.0


@dataclass(frozen=True)
class Follow:
    """Cut the log to ``cut`` if it holds more (the start of the first epoch
    after the one it was last written in: what the master of ``epoch`` may
    not share), then follow the master of ``epoch``. The serving thread
    compares with its log's end when it cuts, not when the order was made."""
    epoch: int
    cut: int


@dataclass(frozen=True)
class Halt:
    """Stop replicating (stay a slave that follows nobody): this broker is
    about to claim the group, and its log must stop growing first, so that
    the epoch it claims starts exactly at its end."""


@dataclass(frozen=True)
class Demote:
    """Stop being master now: fenced (the session lost, the node gone)."""
    why: str


@dataclass(frozen=True)
class Drain:
    """Refuse new writes until a slave holds everything, then hand over
    (a planned switchover); ``on`` False: the switchover was withdrawn (it
    timed out or was cancelled), take writes again."""
    on: bool = True


@dataclass(frozen=True)
class Lease:
    """A master may ack writes until ``until`` (monotonic seconds; 0: revoked)."""
    until: float


@dataclass(frozen=True)
class IsrPublished:
    """The in-sync set ZooKeeper now lists: a SYNC ack counts only those
    slaves (one ZooKeeper does not list could not be elected)."""
    members: frozenset[int] | None


@dataclass(frozen=True)
class IsrWriting:
    """The controller is about to write this in-sync set to ZooKeeper: until
    it is confirmed (``IsrPublished``) ZooKeeper may list it already, so a
    master without its lease counts its members too."""
    members: frozenset[int]


Order = Promote | Follow | Halt | Demote | Drain | Lease | IsrWriting | IsrPublished


class Serving(Protocol):
    """What the controller reads of the serving thread: its last published
    snapshot (``broker.snapshot.BrokerSnapshot``), read-only."""

    @property
    def role(self) -> Role: ...
    @property
    def epoch(self) -> int: ...
    @property
    def local_epoch(self) -> int: ...           # the epoch on disk
    @property
    def max_offset(self) -> int: ...            # the log's end
    @property
    def in_sync_ids(self) -> frozenset[int] | None: ...   # a master: its links in sync
    @property
    def acks_possible(self) -> bool: ...        # a master: enough slaves for a SYNC write
    @property
    def following(self) -> bool: ...            # a slave: its replication link runs
    @property
    def draining(self) -> bool: ...             # a master refusing writes to hand over
    @property
    def drained(self) -> bool: ...              # a master that handed over
