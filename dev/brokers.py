"""Local broker processes as the dev cluster (and, through it, the tests)
run them: waiting until one has registered with its role, until slaves hold
a topic, and making a store's files cold in the page cache."""

from __future__ import annotations

import os
import time

from kazoo.exceptions import NoNodeError

from duomq.coordinator import zk as zkutil
from duomq.coordinator.nodes import MasterNode, MemberNode
from duomq.coordinator.paths import ZkPaths


def wait_for(cond, timeout_s: float = 30, what: str = "condition"):
    """Poll ``cond`` until it returns something true (returned) or time is up
    (AssertionError naming ``what``): tests wait on conditions, never sleep."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")


def log_tail(path: str, lines: int = 80) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def has_role(zk, paths: ZkPaths, group: str, member: MemberNode) -> bool:
    """A member serves once it is the master, or a slave following the
    current master's epoch."""
    try:
        master = MasterNode.from_bytes(zk.get(paths.master(group))[0])
    except NoNodeError:
        return False
    if member.is_master:
        return master.broker_id == member.broker_id
    return member.epoch == master.epoch


def wait_registered(zookeeper: str, cluster: str, group: str, broker_id: int, pid: int,
                    alive, log_path: str, timeout_s: float = 30) -> None:
    """Wait until the broker process ``pid`` holds its member node in ZooKeeper
    and has its role; fail early, with its log, if ``alive()`` turns false."""
    zk = zkutil.connect(zookeeper)
    paths = ZkPaths(cluster)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            # none yet, or a killed predecessor's node that just expired
            member = zkutil.read_member(zk, paths, group, broker_id)
            if member is not None and member.pid == pid and has_role(zk, paths, group, member):
                return
            if not alive():
                raise RuntimeError(f"broker {group}/{broker_id} exited; log {log_path}:\n"
                                   f"{log_tail(log_path)}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"broker {group}/{broker_id} did not register in "
                                   f"{timeout_s:g} s; log {log_path}:\n{log_tail(log_path)}")
            time.sleep(0.05)
    finally:
        zkutil.close(zk)


def read_master(zookeeper: str, cluster: str, group: str) -> MasterNode | None:
    zk = zkutil.connect(zookeeper)
    try:
        return MasterNode.from_bytes(zk.get(ZkPaths(cluster).master(group))[0])
    except NoNodeError:
        return None
    finally:
        zkutil.close(zk)


def wait_takeover(zookeeper: str, cluster: str, group: str, before: MasterNode,
                  timeout_s: float = 30) -> MasterNode | None:
    """The master node once it names another broker than ``before`` (a
    takeover, at a later epoch), or None when none took over in time."""
    zk = zkutil.connect(zookeeper)
    paths = ZkPaths(cluster)
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                now = MasterNode.from_bytes(zk.get(paths.master(group))[0])
            except NoNodeError:
                now = None
            if now is not None and now.broker_id != before.broker_id and \
                    now.epoch > before.epoch:
                return now
            time.sleep(0.05)
        return None
    finally:
        zkutil.close(zk)


def wait_slaves_hold(zookeeper: str, cluster: str, topic: str, timeout_s: float = 30) -> int:
    """Wait until slave reads (``slave_preferred``: a group without a slave
    reads its master) see every message of ``topic`` that the master shows
    (a slave serves only what it holds and was told is confirmed); returns
    the topic's message count."""
    from duomq.client import PullConsumer
    on_master = PullConsumer("probe", zookeeper=zookeeper, cluster=cluster, read_from="master")
    on_slave = PullConsumer("probe", zookeeper=zookeeper, cluster=cluster,
                            read_from="slave_preferred")
    try:
        queues = on_master.queues(topic)

        def ends(consumer):
            return [consumer.max_offset(q) for q in queues]

        wait_for(lambda: ends(on_slave) == ends(on_master), timeout_s,
                 f"the slaves to hold every message of {topic}")
        return sum(ends(on_slave))
    finally:
        on_master.close()
        on_slave.close()


def drop_page_cache(directory: str) -> int:
    """Write back and drop every file of ``directory`` from the page cache
    (posix_fadvise DONTNEED): a cold backlog for read-redirect drills. Pages a
    process has mapped stay resident. Returns the number of files."""
    names = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
    for name in names:
        fd = os.open(os.path.join(directory, name), os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return len(names)


def cached_bytes(directory: str) -> int:
    """Bytes of the files of ``directory`` in the page cache now (mincore):
    what ``drop_page_cache`` could not drop is what a process keeps mapped."""
    from duomq.store.residency import resident_fraction
    total = 0
    for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
        fd = os.open(os.path.join(directory, name), os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            fraction = resident_fraction(fd, 0, size) if size else 0.0
            total += int((fraction or 0.0) * size)
        finally:
            os.close(fd)
    return total
