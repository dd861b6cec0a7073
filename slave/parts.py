"""What a broker has only while it is a slave: its link to the master of the
epoch it follows (``ha_client``, a thread that applies the replicated log
byte for byte), and the slave's answers to readers: reads capped at what its
master confirmed, refused beyond a reader's ``max_replica_lag_ms``, and sent
back to the master once they are within the hot tail. A broker starts as a
slave that follows nobody (``SlaveParts()``) until its group's election
says whom; the serving thread swaps parts on every role change
(``broker.role_switch``). It answers every call of
``broker.role_parts.RoleParts``, a master's duties with nothing (or, for
``master_duties``, NOT_MASTER)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, NoReturn

from duomq.common.config import BrokerConfig
from duomq.common.errors import NotMasterError
from duomq.common.role import Role
from duomq.proto import pb
from duomq.replication.ha_client import HAClient, LinkCurve
from duomq.replication.read_advice import slave_says_go_back

__all__ = ["LinkCurve", "SlaveParts", "truncate"]
log = logging.getLogger(__name__)


def truncate(store, epoch: int, cut: int) -> bool:
    """Cut the log to ``cut`` if it holds more (what the master of ``epoch``
    does not share); True when something was cut."""
    if cut >= store.commitlog.max_offset:
        return False
    removed, records = store.truncate_to(cut)
    log.warning("truncated %d bytes (%d records) past offset %d that the master of epoch %d "
                "does not hold", removed, records, cut, epoch)
    return True


class SlaveParts:
    role = Role.SLAVE
    leads = False
    offsets_move_here = False     # the replication thread moves what ``visible`` reads
    draining = False

    def __init__(self, client: HAClient | None = None, epoch: int = 0,
                 back_ratio: float = 0.0):
        self._client = client          # None: following nobody yet
        self.epoch = epoch
        self.back_ratio = back_ratio   # slave_read_back_ratio (``read_advice``)

    @classmethod
    def follow(cls, store, config, epoch: int, master_ha_address: Callable[[], str | None],
               on_progress: Callable[[int], None], offsets,
               curve: LinkCurve | None = None,
               on_lost: Callable[[], None] = lambda: None) -> SlaveParts:
        """Record ``epoch`` on disk and start replicating from its master
        (the log already cut to what the group shares: ``truncate``);
        ``on_lost`` is called (by the link's thread) for each connection lost."""
        store.epoch_file.write(epoch)
        client = HAClient(store, config, master_ha_address, on_progress, offsets, curve, epoch,
                          on_lost)
        client.start()
        return cls(client, epoch, config.slave_read_back_ratio)

    def stop(self, why: str = "") -> list:
        """Stop following (``why``: for the log); a slave owes no answers.
        The replication thread, once stopped, has handed the store back."""
        if self._client is not None:
            log.info("stopped replicating from the master of epoch %d%s", self.epoch,
                     f": {why}" if why else "")
            self._client.shutdown()
        return []

    def apply(self, config: BrokerConfig) -> None:
        self.back_ratio = config.slave_read_back_ratio

    def on_writer(self, job: Callable[[], None]) -> None:
        """Do ``job``, a write of the store, on its writer: the replication
        thread while it runs (``HAClient.post``), else the calling (serving)
        thread."""
        if self._client is None or not self._client.post(job):
            job()

    # ------------------------------------------------------------ the link
    @property
    def following(self) -> bool:
        return self._client is not None

    @property
    def master_max(self) -> int:
        """The master's log end as last heard (0: not heard)."""
        return self._client.master_max if self._client is not None else 0

    @property
    def halted(self) -> str:
        """Why replication stopped for good ("" while it runs)."""
        return self._client.halted if self._client is not None else ""

    def lag_bytes(self, local_end: int) -> int:
        """Bytes its master holds that this slave does not (as last heard)."""
        return max(0, self.master_max - local_end)

    def lag_ms(self) -> int:
        """How far behind its master, in ms (-1: not caught up since it started)."""
        return self._client.lag_ms() if self._client is not None else -1

    def master_silent_s(self, now: float | None = None) -> float:
        """Since the master was last heard (-1: never)."""
        heard = self._client.last_received if self._client is not None else 0.0
        return (time.monotonic() if now is None else now) - heard if heard else -1.0

    # ------------------------------------------------------------ readers
    def visible(self, end: int, flushed: int) -> int:
        """What readers may see: what this slave holds, capped at what its
        master lets its own consumers see."""
        confirmed = self._client.master_confirmed if self._client is not None else 0
        return min(end, confirmed)

    def read_advice(self, phys: int, total_memory: int, master_id: int | None) -> int | None:
        """Send a reader at commit-log offset ``phys`` back to the master
        (``master_id``) once it is within the hot tail."""
        if self._client is None or master_id is None:
            return None
        lag = max(0, self._client.master_max - phys)
        return master_id if slave_says_go_back(lag, total_memory, self.back_ratio, True) \
            else None

    def lag_refusal(self, bound_ms: int, who: str) -> tuple[int | None, tuple | None]:
        """This slave's lag (None when following nobody) and, when a reader's
        ``bound_ms`` is exceeded, the answer REPLICA_LAGGING naming it."""
        if self._client is None:
            return None, None
        lag = self._client.lag_ms()
        if bound_ms > 0 and (lag < 0 or lag > bound_ms):
            how = "has not caught up with its master since it started" if lag < 0 else \
                f"is {lag} ms behind its master"
            return lag, (pb.REPLICA_LAGGING,
                         f"slave {who} {how} (the reader's max_replica_lag_ms is {bound_ms}); "
                         f"nothing was read", pb.PullResponse(replica_lag_ms=lag))
        return lag, None

    def describe(self, resp: pb.BrokerStatusResponse) -> None:
        """A status answer's slave fields."""
        if self._client is not None:
            resp.master_max_offset = self._client.master_max

    def snapshot_fields(self, visible: int, log_end: int) -> dict[str, Any]:
        """The snapshot's slave fields (``broker.snapshot``)."""
        return dict(following=self.following, master_max_offset=self.master_max,
                    lag_bytes=self.lag_bytes(log_end), lag_ms=self.lag_ms(),
                    replication_halted=self.halted)

    # ------------------------------------------------------------ a master's duties: none
    @staticmethod
    def writable(now: float) -> bool:
        return False

    @staticmethod
    def why_not_writable(who: str, master_address: str | None) -> str:
        return f"{who} is a slave; the master is at {master_address or 'unknown'}"

    @staticmethod
    def master_duties(why: Callable[[], str]) -> NoReturn:
        raise NotMasterError(why())

    @staticmethod
    def lease_valid(now: float) -> bool:
        return False

    @staticmethod
    def acks_without_lease() -> bool:
        return False

    @staticmethod
    def degraded() -> bool:
        return False

    @staticmethod
    def acks_waiting() -> int:
        return 0

    @staticmethod
    def ready_acks(flushed: int, now: float) -> list:
        return []

    @staticmethod
    def overdue_acks(flushed: int, now: float) -> list:
        return []

    @staticmethod
    def pump(now: float, visible: int) -> None:
        """A slave sends its master reports from its replication thread."""

    @staticmethod
    def linger_due() -> float | None:
        return None

    @staticmethod
    def on_replication(identity: bytes, data: bytes, now: float) -> None:
        """A slave's replication port has no slaves to hear (dropped)."""

    @staticmethod
    def due_work(now: float, visible: int, producers, send) -> bool:
        return False

    def housekeeping(self, now: float, store, follower) -> None:
        follower.catch_up(store)      # the share groups' state: a promotion applies only the tail
        if self._client is not None:
            self._client.lift_if_starved(now)     # a link SCHED_IDLE left without CPU

    @staticmethod
    def left_reader(group: str, client: str) -> None:
        """The share groups' readers are the master's."""
