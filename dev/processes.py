"""The dev cluster's processes, found again by pid and start time (psutil):
a pid the kernel has since given to another process is not taken for ours,
so ``duomq dev down`` never signals a stranger."""

from __future__ import annotations

import time

import psutil


def started_at(pid: int) -> float | None:
    """The process's start time (seconds since the epoch), None if it is gone."""
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def find(pid: int | None, started: float | None = None) -> psutil.Process | None:
    """The running process ``pid`` if it is the one started at ``started``
    (when given); None when it is gone, a zombie, or another process."""
    if not pid:
        return None
    try:
        proc = psutil.Process(pid)
        if started is not None and abs(proc.create_time() - started) > 0.01:
            return None
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
    except psutil.Error:
        return None
    return proc


def alive(pid: int | None, started: float | None = None) -> bool:
    return find(pid, started) is not None


def stop(pid: int | None, started: float | None = None, timeout_s: float = 10.0) -> bool:
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
