"""What a Spark task runs: read one queue's offset range from a member of its
broker group over its own ZeroMQ socket, in large pulls, as Arrow batches.

Every member of a group holds the same records at the same queue offsets, so
a task that loses its member (a failover, a dead slave) goes on from the
same offset on the next one; only the planner's addresses age, and they are
looked up again in ZooKeeper when all of them fail."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from duomq.auth.credentials import Credentials
from duomq.client.cluster.members import BrokerMembers, read_candidates
from duomq.client.remoting import RemotingClient
from duomq.client.spark.arrow import records_to_batch
from duomq.common.errors import DuomqError, RequestTimeoutError, for_status
from duomq.common.subscription import parse
from duomq.coordinator import zk as zkutil
from duomq.proto import pb

log = logging.getLogger(__name__)
PULL_TIMEOUT_S = 10.0
STALL_TIMEOUT_S = 120.0       # no progress this long on any member: the task fails
                              # (pollTimeoutMs)
RETRY_PAUSE_S = 0.2


class DataLossError(DuomqError):
    """Offsets a query needs were deleted by retention (failOnDataLoss=true)."""


@dataclass
class ReadTask:
    """One Spark partition: queue offsets [start, end) and where to read them."""

    topic: str
    group: str
    queue_id: int
    start: int
    end: int
    addresses: list[str]          # members in the order to try (readFrom)
    zookeeper: str
    cluster: str
    read_from: str
    fail_on_data_loss: bool
    fetch_messages: int
    consumer_group: str
    subscription: str = "*"       # tags: the broker skips others on its consume queue
    max_replica_lag_ms: int = 0   # a slave serves only within this lag (0: no bound)
    poll_timeout_s: float = STALL_TIMEOUT_S   # no member serves the range this long: fail
    credentials: str | None = None   # a secured cluster: the credentials file's path


def lookup_addresses(task: ReadTask) -> list[str]:
    """The group's members now, from ZooKeeper (when every known one failed)."""
    zk = zkutil.connect(task.zookeeper)
    members = BrokerMembers(zk, task.cluster)
    try:
        return [m.address for m in read_candidates(members.of(task.group), task.read_from)]
    finally:
        members.close()
        zkutil.close(zk)


def read_task(task: ReadTask, remoting: RemotingClient | None = None):
    """Yield Arrow record batches of the task's range, in queue order."""
    own = remoting is None
    remoting = remoting or RemotingClient(
        "duomq-spark-read",
        credentials=Credentials.load(task.credentials) if task.credentials else None)
    try:
        yield from _read(task, remoting)
    finally:
        if own:
            remoting.close()


def _read(task: ReadTask, remoting: RemotingClient):
    sub = parse(task.subscription)
    off, addresses, i = task.start, list(task.addresses), 0
    last_progress = time.monotonic()
    why = ""                          # the last member's refusal, for the error
    while off < task.end:
        if time.monotonic() - last_progress > task.poll_timeout_s:
            raise DuomqError(f"{task.topic}@{task.group}#{task.queue_id}: no member served offset "
                             f"{off} for {task.poll_timeout_s:g} s "
                             f"({_tried(task, addresses, why)})")
        if not addresses or i >= len(addresses):
            time.sleep(RETRY_PAUSE_S)
            addresses, i = lookup_addresses(task), 0
            continue
        address = addresses[i]
        req = pb.PullRequest(consumer_group=task.consumer_group, topic=task.topic,
                             queue_id=task.queue_id, queue_offset=off,
                             max_messages=min(task.fetch_messages, task.end - off),
                             subscription=sub.expression,
                             max_replica_lag_ms=task.max_replica_lag_ms)
        try:
            status, error, resp = remoting.call(address, pb.PULL, req, PULL_TIMEOUT_S)
        except RequestTimeoutError as exc:
            log.warning("reading %s#%d from %s: %s; trying the next member", task.group,
                        task.queue_id, address, exc)
            i += 1
            continue
        if status == pb.OK and resp.count:
            batch = records_to_batch(resp.records, task.topic, task.group, task.queue_id)
            first = batch.column(3)[0].as_py() if batch.num_rows else off
            if first < off or (sub.everything and first != off):
                raise DuomqError(f"{task.group}#{task.queue_id}: asked for offset {off}, "
                                 f"got {first}")
            off = resp.next_offset
            last_progress = time.monotonic()
            if not sub.everything:
                batch = keep_subscribed(batch, sub, task.end)
            if batch.num_rows:
                yield batch
        elif status == pb.NO_MATCHED_MESSAGE and resp is not None and resp.next_offset > off:
            off = resp.next_offset               # a stretch with none of the tags
            last_progress = time.monotonic()
        elif status == pb.OFFSET_ILLEGAL and resp is not None and resp.min_offset > off:
            off = _data_loss(task, off, resp.min_offset)
        elif status == pb.REPLICA_LAGGING:
            # too far behind for maxReplicaLagMs: the next member (slave_preferred
            # lists the master after the slaves), or this one again later
            why = error
            log.info("reading %s#%d: %s", task.group, task.queue_id, error)
            time.sleep(RETRY_PAUSE_S if i + 1 >= len(addresses) else 0)
            i += 1
        elif status in (pb.NO_NEW_MESSAGE, pb.OFFSET_ILLEGAL, pb.OK, pb.TOPIC_NOT_EXIST,
                        pb.SERVICE_NOT_AVAILABLE, pb.NOT_MASTER):
            # this member does not hold the range yet (a slave behind after a
            # failover, a restarted broker): pause, then the next member
            time.sleep(RETRY_PAUSE_S)
            i += 1
        else:
            raise for_status(status, error)


def _tried(task: ReadTask, addresses: list[str], why: str) -> str:
    if not addresses and task.read_from == "slave":
        return (f"no live slave of group {task.group!r}: readFrom=slave never reads the master; "
                f"slave_preferred does")
    return f"tried {', '.join(addresses) or 'no member'}" + (f"; last: {why}" if why else "")


def keep_subscribed(batch, sub, end: int):
    """The rows of the task's range whose tag is subscribed: the broker
    filtered by tag code, which two tags can share, and its scan for matches
    may run past the range's end."""
    import pyarrow as pa
    import pyarrow.compute as pc
    keep = pc.and_(pc.less(batch.column(3), end),
                   pc.is_in(batch.column(6), value_set=pa.array(sorted(sub.tags), pa.string())))
    return batch.filter(keep)


def _data_loss(task: ReadTask, wanted: int, kept: int) -> int:
    what = (f"{task.topic}@{task.group}#{task.queue_id}: offsets {wanted}..{kept - 1} were "
            f"deleted by retention")
    if task.fail_on_data_loss:
        raise DataLossError(f"{what}. The query cannot read them; set failOnDataLoss=false to "
                            f"skip them, or start from later offsets")
    log.warning("%s: skipped (failOnDataLoss=false)", what)
    return min(kept, task.end)
