"""The dev cluster's processes, found again by pid and start time: a pid
the kernel has since given to another process is not taken for ours, so
``duomq dev down`` never signals a stranger.

A start time is the kernel's own, in seconds since boot (``/proc/<pid>/stat``),
which no change of the wall clock moves. psutil's ``create_time`` adds the
boot time as ``/proc/stat`` gives it, in whole seconds derived from the wall
clock: an NTP step or slew of half a second moves it by one, and every
process started before looked like a stranger (a run's ZooKeeper was then
never stopped: its fixture waited 10 s and failed)."""

from __future__ import annotations

import os
import time

import psutil

_TICKS = os.sysconf("SC_CLK_TCK")
STOP_TIMEOUT_S = 10.0   # SIGTERM, then SIGKILL after this long
EPOCH_TIMES = 1e8      # a start time above this is seconds since the epoch (an older state file)


def started_at(pid: int) -> float | None:
    """The process's start time (seconds since boot), None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # the command name, in parentheses, may hold spaces and parentheses
    fields = stat[stat.rindex(b")") + 2:].split()
    return int(fields[19]) / _TICKS            # field 22, starttime: clock ticks since boot


def _same_start(pid: int, proc: psutil.Process, started: float) -> bool:
    if started > EPOCH_TIMES:                  # written by an earlier release: the epoch's
        return abs(proc.create_time() - started) <= 1.5
    now = started_at(pid)
    return now is not None and abs(now - started) <= 0.01


def find(pid: int | None, started: float | None = None) -> psutil.Process | None:
    """The running process ``pid`` if it is the one started at ``started``
    (when given: ``started_at``'s); None when it is gone, a zombie, or
    another process."""
    if not pid:
        return None
    try:
        proc = psutil.Process(pid)
        if started is not None and not _same_start(pid, proc, started):
            return None
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
    except psutil.Error:
        return None
    return proc


def alive(pid: int | None, started: float | None = None) -> bool:
    return find(pid, started) is not None


def stop(pid: int | None, started: float | None = None,
         timeout_s: float = STOP_TIMEOUT_S) -> bool:
    """SIGTERM, then SIGKILL after ``timeout_s``; False when it was not running.
    (Polled rather than waited on: the process is usually not our child, and
    a zombie counts as gone.)"""
    proc = find(pid, started)
    if proc is None:
        return False
    deadline = time.monotonic() + timeout_s
    try:
        proc.terminate()
        while find(pid, started) is not None:
            if time.monotonic() > deadline:
                proc.kill()
                break
            time.sleep(0.05)
    except psutil.NoSuchProcess:
        pass
    return True


def send_signal(pid: int | None, sig: int, started: float | None = None) -> bool:
    proc = find(pid, started)
    if proc is None:
        return False
    try:
        proc.send_signal(sig)
    except psutil.NoSuchProcess:
        return False
    return True
