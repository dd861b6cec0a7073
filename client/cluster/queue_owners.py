"""Who owns each queue of a clustering consumer group, in ZooKeeper: one
ephemeral node per queue, ``/duomq/<cluster>/groups/<group>/owners/
<topic>@<broker group>@<queue id>``, holding the owner's client id.

This orders a hand-off: a member reads a queue only while its node is the
member's, and deletes it only after it has stopped pulling the queue and
committed where it stopped; a new owner that finds the node taken waits for
it to go (a watch says when). A member that dies is taken over when its
ZooKeeper session expires (the node is ephemeral), from its last commit.
Node names are safe: topic and group names are ``[A-Za-z0-9_%-]``, never ``@``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from kazoo.exceptions import NoAuthError, NodeExistsError, NoNodeError

from duomq.client.cluster.made_nodes import acl_in_group
from duomq.common.message import MessageQueue
from duomq.coordinator.group_nodes import QueueOwnerNode
from duomq.coordinator.paths import ZkPaths

log = logging.getLogger(__name__)


def node_name(mq: MessageQueue) -> str:
    return f"{mq.topic}@{mq.broker_group}@{mq.queue_id}"


class QueueOwners:
    """One member's side of the owner nodes. ``on_freed`` is called (on a
    ZooKeeper thread: only wake something up) when a node this member waits
    for is deleted."""

    def __init__(self, zk, cluster: str, group: str, client_id: str,
                 on_freed: Callable[[], None]):
        self.zk = zk
        self.root = ZkPaths(cluster).group_owners(group)
        self.group_node = ZkPaths(cluster).consumer_group(group)
        self.client_id = client_id
        self.on_freed = on_freed
        self._ensured = False

    def path(self, mq: MessageQueue) -> str:
        return f"{self.root}/{node_name(mq)}"

    def _session(self) -> int:
        return self.zk.client_id[0] if self.zk.client_id else -1

    def acquire(self, mqs: Iterable[MessageQueue]) -> tuple[set[MessageQueue],
                                                              dict[MessageQueue, str]]:
        """Take the queues that are free (or already ours): returns (taken,
        {queue: owner} of those another member holds). A watch is left on
        each of the others; ``on_freed`` runs when one goes. Creates are sent
        together, so taking many queues costs about one round trip."""
        mqs = list(mqs)
        if not mqs:
            return set(), {}
        if not self._ensured:
            self.zk.ensure_path(self.root)     # a secured cluster's: made by a broker
            self._ensured = True
        # read again at each round: a secret rotation's step changes the ids
        # the group's node names (one read, beside a round's creates)
        acl = acl_in_group(self.zk, self.group_node)
        data = QueueOwnerNode(self.client_id).to_bytes()
        pending = [(mq, self.zk.create_async(self.path(mq), data, acl=acl, ephemeral=True))
                   for mq in mqs]
        taken: set[MessageQueue] = set()
        held: dict[MessageQueue, str] = {}
        for mq, result in pending:
            try:
                result.get()
                taken.add(mq)
            except NodeExistsError:
                owner = self._holder(mq)
                if owner is None:
                    continue                  # freed meanwhile: the watch woke the next round
                if owner == "":
                    taken.add(mq)             # ours already (a release that did not finish)
                else:
                    held[mq] = owner
        return taken, held

    def _holder(self, mq: MessageQueue) -> str | None:
        """Who holds ``mq``'s node: "" when this session does, None when nobody
        does any more (``on_freed`` then runs). Leaves a watch on the node."""
        path = self.path(mq)

        def watch(_event) -> None:
            self.on_freed()

        try:
            # exists: ZooKeeper checks no right for it, and the watch fires
            # when the node goes (a user granted the group later may not
            # read a node made before)
            stat = self.zk.exists(path, watch=watch)
        except NoNodeError:
            stat = None
        if stat is None:
            self.on_freed()
            return None
        if stat.ephemeralOwner == self._session():
            return ""
        try:
            return QueueOwnerNode.from_bytes(self.zk.get(path)[0]).client_id or "?"
        except (NoNodeError, NoAuthError):
            return "?"

    def release(self, mqs: Iterable[MessageQueue]) -> list[MessageQueue]:
        """Delete our nodes of ``mqs`` (ones that are not ours are left).
        Returns those that could not be deleted now (ZooKeeper unreachable):
        the caller tries again, or the session's end deletes them. The reads,
        then the deletes, are sent together: letting go of many queues costs
        about two round trips."""
        session = self._session()
        failed: list[MessageQueue] = []
        reads = [(mq, self.zk.exists_async(self.path(mq))) for mq in mqs]
        deletes = []
        for mq, read in reads:
            try:
                stat = read.get()
            except NoNodeError:
                continue
            except Exception as exc:
                log.warning("cannot release queue %s of %s yet: %s", mq, self.root, exc)
                failed.append(mq)
                continue
            if stat is None:
                continue
            if stat.ephemeralOwner == session:
                deletes.append((mq, self.zk.delete_async(self.path(mq), version=stat.version)))
        for mq, deleted in deletes:
            try:
                deleted.get()
            except NoNodeError:
                pass
            except Exception as exc:
                log.warning("cannot release queue %s of %s yet: %s", mq, self.root, exc)
                failed.append(mq)
        return failed

    def owners(self) -> dict[str, str]:
        """Every owner node of the group: queue node name -> client id."""
        try:
            names = self.zk.get_children(self.root)
        except NoNodeError:
            return {}
        out = {}
        for name in names:
            try:
                out[name] = QueueOwnerNode.from_bytes(self.zk.get(f"{self.root}/{name}")[0]).client_id
            except NoNodeError:
                pass
        return out
