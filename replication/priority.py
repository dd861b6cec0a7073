"""A slave's replication threads' CPU priority under ASYNC replication
(Linux: scheduling policy and niceness are per thread): lowered when the
link starts, lifted from SCHED_IDLE when the link starves."""

from __future__ import annotations

import logging
import os
import threading

log = logging.getLogger(__name__)


def lower_priority(idle: bool, nice: int) -> bool:
    """Put the calling thread (and the threads it starts) under SCHED_IDLE,
    or, without ``idle`` or where that is refused, make it ``nice`` nicer.
    Best effort: logged if refused. True when it is under SCHED_IDLE."""
    tid = threading.get_native_id()
    if idle:
        try:
            os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
            return True
        except (OSError, AttributeError) as exc:
            log.warning("SCHED_IDLE refused for the replication thread (%s); "
                        "using ha_apply_nice", exc)
    _nicer(tid, nice)
    return False


def lift_idle_threads(nice: int) -> int:
    """Every thread of this process under SCHED_IDLE (a link's thread and
    the ZeroMQ threads it started) back under the normal policy, ``nice``
    nicer than it was. None when the whole broker runs under SCHED_IDLE
    (``chrt --idle``: its operator's choice). Returns how many were lifted."""
    if os.sched_getscheduler(os.getpid()) == os.SCHED_IDLE:
        return 0
    lifted = 0
    for name in os.listdir("/proc/self/task"):
        tid = int(name)
        try:
            if os.sched_getscheduler(tid) != os.SCHED_IDLE:
                continue
            os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
        except OSError:                  # ended meanwhile, or refused
            continue
        _nicer(tid, nice)
        lifted += 1
    return lifted


def _nicer(tid: int, nice: int) -> None:
    if nice <= 0:
        return
    try:
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))
    except OSError as exc:
        log.warning("could not lower the replication thread's priority: %s", exc)
