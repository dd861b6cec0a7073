"""What consumers see, and the answers that wait on it (the serving thread).

Consumers see messages up to ``visible_offset``: on a master the flushed
offset under SYNC_FLUSH and the offset ``sync_replicas`` slaves hold under
SYNC replication (so no consumer reads what a crash or a failover could take
back); on a slave, what it holds, capped at what its master lets consumers
see (``MasterParts.visible``, ``SlaveParts.visible``). When it moves, the
sends waiting for it are acked and the pulls held for it answered."""

from __future__ import annotations

import time

from duomq.broker.core import BrokerCore
from duomq.broker.dispatcher import handle
from duomq.broker.processors import (
    pull_held,
    pull_many_held,
    pull_staged,
    staged_fits,
    staged_readable,
)
from duomq.broker.requests import Request
from duomq.proto import pb
from duomq.share import handlers as share


def before_answer(b: BrokerCore, request: Request, answer) -> bool:
    """The dispatcher's hook, before a handler's answer leaves; True when
    the answer is to leave at the end of the loop's turn
    (``AnswerBook.at_turn_end``): an ASYNC send whose answer woke a consumer.

    What a send leaves for after its ack, in the serving loop's turn
    (issue 41: ~35 us of a one-outstanding send's round trip): the second
    half of its write (its queue entries, its producer's sequence, the
    offsets published: the store's ``SecondHalf``) and, for an ASYNC send
    (no flush or replication to wait for), the visible offsets it moved,
    both owed in the answer book. Both are paid before the next request is
    served (``AnswerBook.serving``), so a pull or a retry sent after the ack
    finds the message, and before the turn goes on (``AnswerBook.settle``:
    after the turn's transfers to the slaves and its group commit, which
    read only the log, so a SYNC send's records leave first; an ASYNC
    send's offsets before them, as the transfers carry them:
    ``AnswerBook.pay``); and before the ack leaves when a pull is held, so
    that held pulls are answered first (the consumer's answer goes out ahead of
    the producer's ack: on a busy host, waking the producer first delayed
    the consumer by about 0.2 ms at the median). A PULL held at the end of
    the queue written is answered from the staged batch itself, ahead of
    the second half too (``answer_staged``); the rest waits for the ack
    unless other pulls or share holds wait on that queue.

    A send that woke a consumer so is acked at the end of the loop's turn,
    after the rest of the turn's work (``AnswerBook.end_turn``). A
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
    if request.type != pb.SEND or b.sync_flush or b.sync_replication:
        return False
    book = b.answers
    if b.pull_hold.held or b.pop_hold.held:
        woken = book.woken
        key = answer_staged(b)
        if b.pop_hold.held or key is None or key in b.pull_hold.held:
            book.pay()       # other holds on that queue: before the ack, as ever
        else:
            book.owe_offsets()
        return book.woken != woken
    book.owe_offsets()
    return False


def recompute(b: BrokerCore) -> bool:
    """``AnswerBook.pay``'s update; True when it stays current until the
    next write (a slave's offsets move on the replication thread: never)."""
    update_visible(b)
    return b.parts.offsets_move_here


def update_unless_current(b: BrokerCore) -> None:
    """The turn's update of the visible offsets, skipped when it would change
    nothing (issue 41: it cost an ASYNC send ~9 us): the last request served
    was an ASYNC send whose offsets were computed (``AnswerBook.current``),
    and since then nothing was written (the schedule's pump) and no write
    waits for an ack. What it reads besides (the flushed offset, the slaves'
    acks) moves only under SYNC_FLUSH or SYNC replication, where sends do
    not update them, or on news the loop reads before serving requests."""
    if b.answers.current and not b.store.appended and not b.parts.acks_waiting():
        return
    update_visible(b)


def update_visible(b: BrokerCore) -> None:
    """Recompute the replicated and visible offsets; answer what they allow."""
    st = b.state
    visible = b.parts.visible(b.store.dispatched_offset, st.flushed_offset)
    appended, pending = b.store.appended, b.pending_queues
    while appended:                  # the queues written to (bounded: one key per queue)
        topic, qid, upto = appended.popleft()
        key = (topic, qid)
        if pending.get(key, -1) < upto:
            pending[key] = upto
    woke = False
    if visible > st.visible_offset:
        st.visible_offset = visible
        woken = b.answers.woken
        answer_ready_pulls(b, visible)
        woke = b.answers.woken != woken
    # the sends' acks after the pulls' answers (as ASYNC's, before_answer):
    # a consumer's answer waited behind the producer's, ~200 us under perf
    # at a SYNC ack (`bench/send_timeline.py` with E2E=1); and when a pull
    # was answered, at the turn's end (as an ASYNC send's that woke one)
    release_waiters(b, late=woke)


def answer_ready_pulls(b: BrokerCore, visible: int) -> None:
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
    if b.pop_hold.held and keys:
        share.serve_held(b, time.monotonic(), {t for t, _q in keys})


def release_waiters(b: BrokerCore, late: bool = False) -> None:
    """Ack the writes whose conditions now hold (``MasterParts.ready_acks``;
    a slave has none). ``late``: the acks leave at the end of the loop's
    turn (``AnswerBook.end_turn``)."""
    parts = b.parts
    if not parts.acks_waiting():
        return
    now = time.monotonic()
    ready = parts.ready_acks(b.state.flushed_offset, now)
    observe, answers = b.metrics.ack_wait.observe, b.answers
    for w in ready:
        observe(now - w.since)
        if late:
            answers.at_turn_end(Request(w.identity, w.request_id, w.type, None),
                                (pb.OK, "", w.response))
        else:
            answers.reply(w.identity, w.request_id, w.type, pb.OK, "", w.response)


def expire_waiters(b: BrokerCore, now: float) -> None:
    """Answer the writes past a deadline with their condition unmet."""
    parts = b.parts
    if not parts.acks_waiting():
        return
    cfg = b.config
    for w, status in parts.overdue_acks(b.state.flushed_offset, now):
        what = ("not flushed within sync_flush_timeout_ms "
                f"({cfg.sync_flush_timeout_ms} ms)") if status == pb.FLUSH_DISK_TIMEOUT \
            else (f"not held by the slaves in sync (sync_replicas {cfg.sync_replicas}, "
                  f"min_sync_replicas {cfg.min_sync_replicas}) within slave_timeout_ms "
                  f"({cfg.slave_timeout_ms} ms)")
        b.answers.reply(w.identity, w.request_id, w.type, status,
                        what + "; the message is stored", w.response)


def answer_staged(b: BrokerCore) -> tuple[str, int] | None:
    """An ASYNC send's staged batch (``AnswerBook.staged``): the PULLs held
    at its queue's end that it answers whole (``processors.staged_fits``)
    are answered from its bytes now, ahead of its second half, its offsets
    and its ack (issue 41: ~55 us of an ASYNC pair's e2e). Returns the queue
    (None: no batch is staged)."""
    staged = b.answers.staged()
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
            answer = handle(b, lambda core, _r: pull_staged(core, staged), request)
            if answer is not None:
                b.answers.answer_held(request, answer)
    return key


def visible_max(b: BrokerCore, topic: str, queue_id: int) -> int:
    cq = b.store.find_queue(topic, queue_id)
    return b.store.visible_max_offset(cq, b.state.visible_offset) if cq else 0


def answer_pulls(b: BrokerCore, pulls) -> None:
    """Answer held pulls now (their data arrived, or their wait ended)."""
    now = time.monotonic()
    for p in pulls:
        b.metrics.pull_hold.observe(now - p.since)
        request = Request(p.identity, p.request_id, p.type, p.request)
        answer = handle(b, pull_held if p.type == pb.PULL else pull_many_held, request)
        if answer is not None:
            b.answers.answer_held(request, answer)
