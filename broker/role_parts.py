"""What the broker asks of the role it plays, with one signature for both
roles (``master.parts.MasterParts``, ``slave.parts.SlaveParts``; mypy checks
that each satisfies ``RoleParts``). The serving loop, the handlers and the
snapshot call these and never ask which role it is; a role without a duty
answers it with nothing (a slave has no acks to release, a master no lag
to refuse). ``role_switch`` alone makes parts and names their classes."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from duomq.common.config import BrokerConfig
from duomq.common.role import Role
from duomq.proto import pb

if TYPE_CHECKING:
    from duomq.master.parts import AckWaiter, MasterParts
    from duomq.share.book import ShareFollower


class RoleParts(Protocol):
    @property
    def role(self) -> Role: ...

    @property
    def leads(self) -> bool:
        """This broker leads its group: it takes writes, keeps the offsets
        committed and acks (the master)."""
        ...

    def stop(self, why: str) -> list[tuple[AckWaiter, int, str]]:
        """The role ends: the answers still owed (status, error), each."""
        ...

    def on_writer(self, job: Callable[[], None]) -> None:
        """Do ``job``, a write of the store, on the store's writer."""
        ...

    def apply(self, config: BrokerConfig) -> None:
        """A runtime setting changed."""
        ...

    # ------------------------------------------------------------ what readers see
    def visible(self, end: int, flushed: int) -> int:
        """What consumers may read of ``end`` (the dispatched log), the log
        being fsynced up to ``flushed``."""
        ...

    @property
    def offsets_move_here(self) -> bool:
        """Whether what ``visible`` reads moves only on the serving thread
        (a slave's moves on its replication thread)."""
        ...

    def read_advice(self, phys: int, total_memory: int, master_id: int | None) -> int | None:
        """The broker a reader at commit-log offset ``phys`` should go to (None: here)."""
        ...

    def lag_refusal(self, bound_ms: int, who: str) -> tuple[int | None, tuple | None]:
        """The lag behind the master (None: none to tell) and the refusal of
        a reader whose ``bound_ms`` it exceeds (None: served)."""
        ...

    def lag_bytes(self, local_end: int) -> int:
        """Bytes the master holds that this broker does not."""
        ...

    # ------------------------------------------------------------ writes and acks
    def writable(self, now: float) -> bool:
        """Writes are taken now."""
        ...

    def why_not_writable(self, who: str, master_address: str | None) -> str:
        """Why writes are refused, for the refusal's text."""
        ...

    def master_duties(self, why: Callable[[], str]) -> MasterParts:
        """The master's duties; NotMasterError (``why()``) on a slave."""
        ...

    def acks_waiting(self) -> int:
        """Writes waiting for their durability conditions."""
        ...

    def ready_acks(self, flushed: int, now: float) -> list[AckWaiter]:
        """The waiting writes whose conditions hold now (their answers marked)."""
        ...

    def overdue_acks(self, flushed: int, now: float) -> list[tuple[AckWaiter, int]]:
        """The waiting writes past a deadline, with the status to answer."""
        ...

    def degraded(self) -> bool:
        """A SYNC master acking with fewer slaves than sync_replicas."""
        ...

    # ------------------------------------------------------------ the serving loop
    def pump(self, now: float, visible: int) -> None:
        """Send the slaves what they lack (a master)."""
        ...

    def linger_due(self) -> float | None:
        """When a lingering transfer is due (monotonic s; None: none)."""
        ...

    def on_replication(self, identity: bytes, data: bytes, now: float) -> None:
        """A message of the replication port."""
        ...

    def due_work(self, now: float, visible: int, producers: Callable[[str, str], list[bytes]],
                 send: Callable[[bytes, bytes], Any]) -> bool:
        """Delayed messages come due, transactions checked back; True when
        it wrote."""
        ...

    def housekeeping(self, now: float, store: Any, follower: ShareFollower) -> None:
        """The periodic scans of this role."""
        ...

    @property
    def draining(self) -> bool:
        """A master handing over: no new writes."""
        ...

    # ------------------------------------------------------------ status
    def lease_valid(self, now: float) -> bool: ...

    def acks_without_lease(self) -> bool: ...

    @property
    def following(self) -> bool: ...

    def master_silent_s(self, now: float) -> float: ...

    def describe(self, resp: pb.BrokerStatusResponse) -> None:
        """A status answer's fields of this role."""
        ...

    def snapshot_fields(self, visible: int, log_end: int) -> dict[str, Any]:
        """The snapshot's fields of this role (``broker.snapshot``)."""
        ...

    def left_reader(self, group: str, client: str) -> None:
        """A client of ``group`` closed (a share group's reader gone)."""
        ...
