"""How much memory a broker's page cache may hold: the machine's, or less when
the process's memory cgroup is limited (a Kubernetes pod's memory limit).
Page cache is charged to the cgroup, so a backlog larger than a share of the
*limit* is cold, however much memory the node has. The read-redirect ratio
(``access_in_memory_max_ratio``) is taken of this figure."""

from __future__ import annotations

import os

import psutil

UNLIMITED = 1 << 62            # cgroup v1 writes "no limit" as a page-rounded 2**63 - 1


def usable_memory(proc_cgroup: str = "/proc/self/cgroup", root: str = "/sys/fs/cgroup") -> int:
    """The machine's physical memory, or the cgroup limit when lower."""
    total = psutil.virtual_memory().total
    limit = cgroup_memory_limit(proc_cgroup, root)
    return min(total, limit) if limit else total


def cgroup_memory_limit(proc_cgroup: str = "/proc/self/cgroup",
                        root: str = "/sys/fs/cgroup") -> int | None:
    """The tightest memory limit on this process's cgroup and its ancestors
    (cgroup v2 ``memory.max``, v1 ``memory.limit_in_bytes``), None if none."""
    try:
        with open(proc_cgroup) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    limits = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "" and os.path.isfile(os.path.join(root, "cgroup.controllers")):
            base, name = root, "memory.max"                          # v2, unified
        elif "memory" in controllers.split(","):
            base, name = os.path.join(root, "memory"), "memory.limit_in_bytes"   # v1
        else:
            continue
        # our own cgroup, then its ancestors (in a container's cgroup namespace
        # the path is "/" and the mount's root is the container's cgroup)
        parts = [p for p in path.split("/") if p]
        for depth in range(len(parts), -1, -1):
            limit = _read_limit(os.path.join(base, *parts[:depth], name))
            if limit is not None:
                limits.append(limit)
    return min(limits) if limits else None


def _read_limit(path: str) -> int | None:
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    if not text.isdigit() or int(text) >= UNLIMITED:      # "max", or v1's "unlimited"
        return None
    return int(text)
