"""What consumers see, and the answers that wait on it (the serving thread).

Consumers see messages up to ``visible_offset``: on a master the flushed
offset under SYNC_FLUSH and the offset ``sync_replicas`` slaves hold under
SYNC replication (so no consumer reads what a crash or a failover could take
back); on a slave, what it holds, capped at what its master lets consumers
see (``MasterParts.visible``, ``SlaveParts.visible``). When it moves, the
sends waiting for it are acked and the pulls held for it answered."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from duomq.broker import share
from duomq.broker.processors import (
    pull_held,
    pull_many_held,
    pull_staged,
    staged_fits,
    staged_readable,
)
from duomq.broker.requests import Request
from duomq.common.role import Role
from duomq.proto import pb

if TYPE_CHECKING:
    from duomq.broker.server import Broker


class AfterSends:
    """What a send leaves for after its ack, in the serving loop's turn
    (issue 41: ~35 us of a one-outstanding send's round trip): the second
    half of its write (its queue entries, its producer's sequence, the
    offsets published: ``MessageStore.finish``) and, for an ASYNC send (no
    flush or replication to wait for), the visible offsets it moved. Both
    are done before the next request is served (``serving``), so a pull or a
    retry sent after the ack finds the message, and before the turn goes on
    (``settle``: after the turn's transfers to the slaves and its group
    commit, which read only the log, so a SYNC send's records leave first;
    an ASYNC send's offsets before them, as the transfers carry them: ``pay``);
    and before the ack leaves when a pull is held, so that
    held pulls are answered first (the consumer's answer goes out ahead of
    the producer's ack: on a busy host, waking the producer first delayed
    the consumer by about 0.2 ms at the median). A PULL held at the end of
    the queue written is answered from the staged batch itself, ahead of
    the second half too (``answer_staged``); the rest waits for the ack
    unless other pulls or share holds wait on that queue.

    A send that woke a consumer so is acked at the end of the loop's turn,
    after the rest of the turn's work (``Dispatcher.answer_late``). A
    socket's wake-up tells the kernel the writer will sleep soon (a "sync"
    wake-up), so while the consumer just woken ran on the other CPU, the
    producer woken by its ack was put on the serving thread's CPU and ran
    its own code there before the turn could go on; the next message then
    found the loop still busy (82% of them, ~140 us at the median). On the
    2-core machine a 2,000 msg/s stream's e2e p50 went from 435-526 to
    337-396 us (7 alternated pairs). A one-outstanding producer with a
    consumer tailing its queue pays the turn's tail on each ack (1,882-1,939
    sends a second against 2,007-2,104); a send whose answer woke no one is
    acked at once, as before."""

    def __init__(self, b: Broker):
        self.b = b
        # the offsets were computed after the last request served (an ASYNC
        # send's): the turn's own update may be skipped (``current``)
        self.now = False
        # an ASYNC send was acked and its offsets are not computed yet
        self.owed = False

    def before_answer(self, request: Request, answer) -> bool:
        """The dispatcher's hook, before an answer leaves; True when the
        answer is to leave at the end of the loop's turn (``answer_late``):
        an ASYNC send whose answer woke a consumer."""
        b = self.b
        if request.type == pb.SEND and not (b.sync_flush or b.sync_replication):
            if b.pull_hold.held or b.share_holds:
                replies = b.dispatcher.replies
                key = answer_staged(b)
                if b.share_holds or key is None or key in b.pull_hold.held:
                    self.pay()       # other holds on that queue: before the ack, as ever
                else:
                    self.owed = True
                return b.dispatcher.replies != replies
            self.owed = True
        return False

    def serving(self) -> None:
        """A request is about to be served."""
        self.settle()
        self.now = False

    def settle(self) -> None:
        """Do what the sends served so far left for after their acks."""
        if self.b.store.owed is not None:
            self.b.store.finish()
        if self.owed:
            self.pay()

    def pay(self) -> None:
        """Compute the offsets an ASYNC send moved (answering the pulls they
        release)."""
        self.owed = False
        self.b.store.finish()
        update_visible(self.b)
        # (a slave's offsets move on the replication thread: never current)
        self.now = self.b.state.role == Role.MASTER

    def current(self) -> bool:
        """Whether the turn's update of the visible offsets would change
        nothing (issue 41: it cost an ASYNC send ~9 us): the last request
        served was an ASYNC send whose offsets were computed, and since then
        nothing was written (the schedule's pump) and no write waits for an
        ack. What it reads besides (the flushed offset, the slaves' acks)
        moves only under SYNC_FLUSH or SYNC replication, where sends do not
        update them, or on news the loop reads before serving requests."""
        b = self.b
        if not self.now or b.store.appended:
            return False
        m = b.master()
        return m is None or not len(m.ack_waiters)


def update_visible(b: Broker) -> None:
    """Recompute the replicated and visible offsets; answer what they allow."""
    st = b.state
    visible = b.parts.visible(b.store.dispatched_offset, st)
    appended, pending = b.store.appended, b.pending_queues
    while appended:                  # the queues written to (bounded: one key per queue)
        topic, qid, upto = appended.popleft()
        key = (topic, qid)
        if pending.get(key, -1) < upto:
            pending[key] = upto
    woke = False
    if visible > st.visible_offset:
        st.visible_offset = visible
        replies = b.dispatcher.replies
        answer_ready_pulls(b, visible)
        woke = b.dispatcher.replies != replies
    # the sends' acks after the pulls' answers (as ASYNC's, AfterSends.before_answer):
    # a consumer's answer waited behind the producer's, ~200 us under perf
    # at a SYNC ack (`bench/send_timeline.py` with E2E=1); and when a pull
    # was answered, at the turn's end (as an ASYNC send's that woke one)
    if st.role == Role.MASTER:
        release_waiters(b, late=woke)


def answer_ready_pulls(b: Broker, visible: int) -> None:
    """Answer the held pulls of the queues written to whose entries became
    visible: only those queues are looked at, so a send costs the same with
    10 held pulls or 10,000. A queue stays pending until all it was written
    is visible (a pull held meanwhile is answered then)."""
    pending = b.pending_queues
    keys = list(pending)
    for key in keys:
        if pending[key] <= visible:
            del pending[key]
    if b.pull_hold.held and keys:
        answer_pulls(b, b.pull_hold.take_ready(lambda t, q: visible_max(b, t, q), keys))
    if b.share_holds and keys:
        share.serve_held(b, time.monotonic(), {t for t, _q in keys})


def release_waiters(b: Broker, late: bool = False) -> None:
    """Ack the writes whose conditions now hold: under the quorum rule with
    the lease, else only what every slave of the in-sync set holds (a
    successor may exist, and it is one of them). ``late``: the acks leave
    at the end of the loop's turn (``Dispatcher.answer_late``)."""
    m = b.master()
    if m is None or not len(m.ack_waiters):
        return
    now = time.monotonic()
    st = b.state
    leased = st.lease_valid(now)
    if not leased and not m.acks_without_lease():
        return
    for w in m.ack_waiters.release(*m.conditions(st.flushed_offset, st.replicated_offset,
                                                 leased)):
        b.metrics.ack_wait.observe(now - w.since)
        if w.type == pb.SEND:
            b.mark_replicas(w.response)
        if late:
            b.dispatcher.late.append((Request(w.identity, w.request_id, w.type, None),
                                      (pb.OK, "", w.response)))
        else:
            b.dispatcher.reply(w.identity, w.request_id, w.type, pb.OK, "", w.response)


def expire_waiters(b: Broker, now: float) -> None:
    """Answer the writes past a deadline with their condition unmet."""
    m = b.master()
    if m is None:
        return
    cfg, st = b.config, b.state
    leased = st.lease_valid(now)
    for w, status in m.ack_waiters.expire(now, *m.conditions(st.flushed_offset,
                                                              st.replicated_offset, leased)):
        what = ("not flushed within sync_flush_timeout_ms "
                f"({cfg.sync_flush_timeout_ms} ms)") if status == pb.FLUSH_DISK_TIMEOUT \
            else (f"not held by the slaves in sync (sync_replicas {cfg.sync_replicas}, "
                  f"min_sync_replicas {cfg.min_sync_replicas}) within slave_timeout_ms "
                  f"({cfg.slave_timeout_ms} ms)")
        b.dispatcher.reply(w.identity, w.request_id, w.type, status,
                           what + "; the message is stored", w.response)


def answer_staged(b: Broker) -> tuple[str, int] | None:
    """An ASYNC send's staged batch (``MessageStore.staged``): the PULLs held
    at its queue's end that it answers whole (``processors.staged_fits``)
    are answered from its bytes now, ahead of its second half, its offsets
    and its ack (issue 41: ~55 us of an ASYNC pair's e2e). Returns the queue
    (None: no batch is staged)."""
    staged = b.store.staged()
    if staged is None:
        return None
    fresh = staged[0]
    key = (fresh.topic, fresh.queue_id)
    if not staged_readable(b, fresh):
        return key
    pulls = b.pull_hold.take_where(key, lambda fit: staged_fits(fit, fresh))
    if pulls:
        now = time.monotonic()
        for p in pulls:
            b.metrics.pull_hold.observe(now - p.since)
            request = Request(p.identity, p.request_id, pb.PULL, p.request)
            answer = b.dispatcher.call(lambda core, _r: pull_staged(core, staged), request)
            if answer is not None:
                b.dispatcher.answer(request, answer)
    return key


def visible_max(b: Broker, topic: str, queue_id: int) -> int:
    cq = b.store.find_queue(topic, queue_id)
    return b.store.visible_max_offset(cq, b.state.visible_offset) if cq else 0


def answer_pulls(b: Broker, pulls) -> None:
    """Answer held pulls now (their data arrived, or their wait ended)."""
    now = time.monotonic()
    for p in pulls:
        b.metrics.pull_hold.observe(now - p.since)
        request = Request(p.identity, p.request_id, p.type, p.request)
        answer = b.dispatcher.call(pull_held if p.type == pb.PULL else pull_many_held, request)
        if answer is not None:
            b.dispatcher.answer(request, answer)
