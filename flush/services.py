"""The flush services. Each reports the new flushed offset through
``on_flushed(offset)``, which the broker turns into answers to waiting sends."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

from duomq.common.config import BrokerConfig, FlushDiskType
from duomq.common.flush_policy import should_flush
from duomq.common.service import ServiceThread

log = logging.getLogger(__name__)
# a serving thread with nothing else to do runs the group commit itself while
# fdatasync takes at most this long (a slower disk: the group-commit thread)
INLINE_MAX_S = 0.002


def fault_flush_delay_s() -> float:
    """Fault injection for drills and tests: ``DUOMQ_FAULT_FLUSH_DELAY_MS``
    makes every group commit wait that long before its (real) fdatasync, as a
    slow or saturated disk would. Unset in production."""
    return float(os.environ.get("DUOMQ_FAULT_FLUSH_DELAY_MS", "0")) / 1000


class GroupCommitService(ServiceThread):
    """SYNC_FLUSH: woken by every append; each fdatasync covers everything
    written before it started, so sends that arrive during a sync share the next.
    A serving thread with no other request waiting calls ``flush_inline``
    instead: the same fdatasync on its own thread, with no wake-up of this
    one and no note back (two thread hops of a lone send)."""

    name = "group-commit"

    def __init__(self, commitlog, on_flushed: Callable[[int], None],
                 observe: Callable[[float], None] = lambda s: None):
        super().__init__()
        self.commitlog = commitlog
        self.on_flushed = on_flushed
        self.observe = observe          # each fdatasync's seconds (the broker's histogram)
        self.syncs = 0
        self.last_s = 0.0               # the last fdatasync's seconds
        self._count = threading.Lock()  # observe and syncs: two threads flush
        self.fault_delay_s = fault_flush_delay_s()
        if self.fault_delay_s:
            log.warning("fault injection: each flush is delayed by %.0f ms",
                        self.fault_delay_s * 1000)

    def run(self) -> None:
        while not self.stopped:
            self.wait_for_running(0.01)
            if self.commitlog.mfq.unflushed_bytes():
                if self.fault_delay_s:
                    time.sleep(self.fault_delay_s)
                t0 = time.perf_counter()
                flushed = self.commitlog.flush()
                self._counted(time.perf_counter() - t0)
                self.on_flushed(flushed)
        self.on_flushed(self.commitlog.flush())

    def flush_inline(self) -> int | None:
        """The caller's own group commit: the flushed offset, or None when
        this thread should be woken instead (a sync under way here, the last
        one slower than ``INLINE_MAX_S``, or injected flush delays)."""
        mfq = self.commitlog.mfq
        if not mfq.unflushed_bytes():          # nothing left: no sync needed
            return mfq.flushed_offset()
        if self.fault_delay_s or self.last_s > INLINE_MAX_S:
            return None
        t0 = time.perf_counter()
        flushed = self.commitlog.mfq.try_flush()
        if flushed is not None:
            self._counted(time.perf_counter() - t0)
        return flushed

    def _counted(self, seconds: float) -> None:
        with self._count:
            self.last_s = seconds
            self.observe(seconds)
            self.syncs += 1


class FlushRealTimeService(ServiceThread):
    """ASYNC_FLUSH: periodic flush by dirty pages, and a thorough one."""

    name = "flush-real-time"

    def __init__(self, commitlog, config: BrokerConfig, on_flushed: Callable[[int], None],
                 observe: Callable[[float], None] = lambda s: None):
        super().__init__()
        self.commitlog = commitlog
        self.config = config
        self.on_flushed = on_flushed
        self.observe = observe
        self.syncs = 0

    def run(self) -> None:
        cfg = self.config
        last_thorough = time.monotonic() * 1000
        while not self.stopped:
            self.wait_for_running(cfg.flush_interval_ms / 1000)
            now = time.monotonic() * 1000
            go, thorough = should_flush(self.commitlog.mfq.unflushed_bytes(),
                                        cfg.flush_least_pages, now, last_thorough,
                                        cfg.flush_thorough_interval_ms)
            if thorough:
                last_thorough = now
            if go:
                t0 = time.perf_counter()
                flushed = self.commitlog.flush()
                self.observe(time.perf_counter() - t0)
                self.on_flushed(flushed)
                self.syncs += 1
        self.on_flushed(self.commitlog.flush())

    def flush_inline(self) -> int | None:
        return None                     # ASYNC_FLUSH: nothing waits on a flush


FlushService = GroupCommitService | FlushRealTimeService


def make_flush_service(store, config: BrokerConfig, on_flushed,
                       observe: Callable[[float], None] = lambda s: None) -> FlushService:
    if config.flush is FlushDiskType.SYNC_FLUSH:
        return GroupCommitService(store.commitlog, on_flushed, observe)
    return FlushRealTimeService(store.commitlog, config, on_flushed, observe)
