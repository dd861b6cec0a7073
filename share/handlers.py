"""Share consumption on the master (RocketMQ 5's POP, Kafka's share groups):
POP hands a share group's next visible messages to whichever consumer asks,
each invisible to the others until its deadline; SHARE_ACK accepts, releases
or renews them by receipt. The master's parts hold the state
(``share.service``): every change is an op written to the share log
and applied, and the answer waits until that write is as durable as a send
would be (SYNC_FLUSH, SYNC replication), so a failover or a restart finds
every answered change. A message due again after ``max_deliveries`` deliveries
goes to ``%DLQ%<group>`` instead, with its delivery count.

POPs that find nothing are held (long polling, ``pop_hold`` beside the
pull's ``pull_hold``) and looked at again when a queue of their topic is
written to and on every housekeeping turn (for messages whose invisible
time ended)."""

from __future__ import annotations

import secrets
import time

from duomq.broker.core import BrokerCore
from duomq.broker.requests import Answer, Request, client_key, hosted, master_only, writable
from duomq.common import subscription
from duomq.common.errors import (
    BadRequestError,
    QuotaExceededError,
    ServiceNotAvailableError,
    answer_for,
)
from duomq.common.names import validate_name
from duomq.master.parts import MasterParts
from duomq.proto import pb
from duomq.share.pop_hold import HeldPop

DEFAULT_MAX_DELIVERIES = 16         # RocketMQ's maxReconsumeTimes
MAX_DELIVERIES = 1000
MIN_INVISIBLE_MS, MAX_INVISIBLE_MS = 100, 12 * 3600 * 1000
DEFAULT_POP_MESSAGES = 32
MAX_CLIENT_ID = 256
MAX_RECEIPTS = 1024                 # receipts one share ack may name


# ------------------------------------------------------------ handlers
def pop(b: BrokerCore, r: Request) -> Answer | None:
    req: pb.PopRequest = r.message
    m = master_only(b)
    queues = _checked(b, req.consumer_group, req.topic)
    if not MIN_INVISIBLE_MS <= req.invisible_ms <= MAX_INVISIBLE_MS:
        raise BadRequestError(f"invisible_ms {req.invisible_ms}: use {MIN_INVISIBLE_MS} to "
                              f"{MAX_INVISIBLE_MS}")
    if not 0 <= req.max_deliveries <= MAX_DELIVERIES:
        raise BadRequestError(f"max_deliveries {req.max_deliveries}: use 1 to {MAX_DELIVERIES} "
                              f"(0: {DEFAULT_MAX_DELIVERIES})")
    if req.max_messages < 0:
        raise BadRequestError("max_messages must be >= 0")
    subscription.parse(req.subscription)       # refused now, not when held
    if len(req.client_id) > MAX_CLIENT_ID:
        raise BadRequestError(f"a client id is at most {MAX_CLIENT_ID} characters")
    writable(b)
    b.admit(r.user, "share_groups", req.consumer_group)
    who = client_key(r.user, req.client_id)
    m.share.heard_reader(req.consumer_group, who, _now_ms())
    found, answer = _serve(b, m, r.identity, r.request_id, req, queues, who)
    if found:
        return answer
    wait_ms = min(req.max_wait_ms, b.config.long_polling_timeout_ms)
    if wait_ms > 0:
        _may_hold(b, r.user)
        b.pop_hold.hold(HeldPop(r.identity, r.request_id, req,
                                time.monotonic() + wait_ms / 1000, who))
        return None
    return pb.NO_NEW_MESSAGE, "", pb.PopResponse()


def share_ack(b: BrokerCore, r: Request) -> Answer | None:
    """ACCEPT, RELEASE or RENEW popped messages; each receipt judged alone
    (RECEIPT_EXPIRED for one that no longer holds its message)."""
    req: pb.ShareAckRequest = r.message
    m = master_only(b)
    _checked(b, req.consumer_group, req.topic)
    kind = _ACTIONS.get(req.action)
    if kind is None:
        raise BadRequestError("a share ack is ACCEPT, RELEASE or RENEW")
    if kind == "renew" and not MIN_INVISIBLE_MS <= req.ms <= MAX_INVISIBLE_MS:
        raise BadRequestError(f"a renewal's ms {req.ms}: use {MIN_INVISIBLE_MS} to "
                              f"{MAX_INVISIBLE_MS}")
    if kind == "release" and not 0 <= req.ms <= MAX_INVISIBLE_MS:
        raise BadRequestError(f"a release's delay {req.ms}: use 0 to {MAX_INVISIBLE_MS}")
    if not req.receipts:
        raise BadRequestError("a share ack names no receipt")
    if len(req.receipts) > MAX_RECEIPTS:
        raise BadRequestError(f"a share ack names {len(req.receipts)} receipts: at most "
                              f"{MAX_RECEIPTS} a request (a client splits larger acks)")
    if len(req.client_id) > MAX_CLIENT_ID:
        raise BadRequestError(f"a client id is at most {MAX_CLIENT_ID} characters")
    writable(b)
    now = _now_ms()
    judged = m.share.judge(req.consumer_group, req.topic, kind,
                           [(x.queue_id, x.queue_offset, x.delivery_count, x.key)
                            for x in req.receipts], req.ms, now,
                           client_key(r.user, req.client_id))
    resp = pb.ShareAckResponse(deadline_ms=judged.until if kind == "renew" else 0)
    for why in judged.errors:
        resp.statuses.append(pb.OK if why is None else pb.RECEIPT_EXPIRED)
        resp.errors.append(why or "")
    if not judged.ops:
        return pb.OK, "", resp
    _enough_slaves(b, m)
    end = m.share.write(judged.ops, [], now)
    b.state.appended = True
    return _durable(b, m, r.identity, r.request_id, pb.SHARE_ACK, resp, end)


_ACTIONS = {pb.ACCEPT: "ack", pb.RELEASE: "release", pb.RENEW: "renew"}


def _may_hold(b: BrokerCore, user: str | None) -> None:
    """QuotaExceededError when ``user`` has its quota of POPs held already."""
    if b.guard is None or user is None:
        return
    mine = user + "/"
    held = b.pop_hold.held_by(mine)
    limit = b.quota(user, "held_pops")
    if held >= limit:
        raise QuotaExceededError(f"user {user!r} has {held} POPs held on this broker, its quota "
                                 f"held_pops ({limit}): this one is refused (an admin raises "
                                 f"it: duomq auth user update {user} --quota held_pops=N)")


def _checked(b: BrokerCore, group: str, topic: str) -> int:
    """The queues this group hosts of ``topic`` (a group's own retry or
    dead-letter topic may be read too; the broker's own topics never)."""
    validate_name("consumer group", group)
    return hosted(b, topic)


# ------------------------------------------------------------ serving a pop
def _serve(b: BrokerCore, m: MasterParts, identity: bytes, request_id: int,
           req: pb.PopRequest, queues: int, who: str) -> tuple[bool, Answer | None]:
    """``(True, answer)`` when the pop finds messages (or moved some to the
    dead-letter queue): the answer, or None when it waits to be durable;
    ``(False, None)`` when nothing is visible for the group now. What it
    hands out is held by ``who``, under a new random receipt key."""
    now = _now_ms()
    # a client of an earlier release sends no client id and no key back: its
    # receipts are its user's alone
    key = secrets.randbits(64) | 1 if req.client_id else 0
    plan = m.share.plan_pop(
        req.consumer_group, req.topic, queues,
        min(req.max_messages or DEFAULT_POP_MESSAGES, b.config.max_pull_messages),
        req.invisible_ms, req.max_deliveries or DEFAULT_MAX_DELIVERIES, req.from_first,
        subscription.parse(req.subscription), b.state.visible_offset, now,
        (lambda phys: m.read_advice(phys, b.total_memory)) if req.slave_reads else None,
        who, key)
    if not plan.ops:
        return False, None
    _enough_slaves(b, m)
    if plan.dead:
        m.heard(req.consumer_group)     # its dead-letter topic, from its first dead letter
    end = m.share.write(plan.ops, plan.dead, now)
    b.state.appended = True
    if not plan.given and not plan.dead:
        return False, None                        # only cursors moved (filtered out)
    resp = pb.PopResponse(count=len(plan.records), records=b"".join(plan.records),
                          deadline_ms=plan.deadline, dead_lettered=len(plan.dead),
                          receipt_key=key)
    resp.delivery_counts.extend(plan.counts)
    for qid, chosen in sorted(plan.remote.items()):
        if chosen:
            resp.slave_reads.add(queue_id=qid, queue_offsets=[o for o, _n in chosen],
                                 delivery_counts=[n for _o, n in chosen])
    if plan.slave is not None and plan.remote:
        resp.read_from_broker_id = plan.slave
        b.state.redirects += 1
    if not plan.given:
        return True, (pb.NO_NEW_MESSAGE, "", resp)
    return True, _durable(b, m, identity, request_id, pb.POP, resp, end)


# ------------------------------------------------------------ answers
def _enough_slaves(b: BrokerCore, m: MasterParts) -> None:
    """SYNC replication with too few slaves in sync while ZooKeeper still
    lists one (an election could pick it, and a change it never saw would
    be taken back): refused before anything is written. A master the group
    is alone in serves: a change no slave saw can only cause a redelivery
    later, never a loss."""
    if m.slaves_missing() and not m.alone():
        raise ServiceNotAvailableError(
            f"fewer than min_sync_replicas ({b.config.min_sync_replicas}) slaves are in sync "
            f"to confirm a share group's change: nothing was changed")


def _durable(b: BrokerCore, m: MasterParts, identity: bytes, request_id: int, type_: int,
             resp, end: int) -> Answer | None:
    """The answer now, or None when it waits until ``end`` is as durable as
    a send's (``MasterParts.wait_for_ack``)."""
    if m.wait_for_ack(end, identity, request_id, resp, type_, rewrite=True):
        return None
    return pb.OK, "", resp


# ------------------------------------------------------------ held pops
def serve_held(b, now: float, topics: set[str] | None = None) -> None:
    """Answer the held pops that find messages now: with ``topics``, those
    of the topics just written to; else (housekeeping) those of groups with
    messages visible again by now, and the overdue ones answered empty.
    Holds of one group and topic see one state: once one of them finds
    nothing, the others are not asked (a thousand idle consumers cost one
    look per write, not a thousand)."""
    holds = b.pop_hold.held
    if not holds:
        return
    # a master taking writes serves them; else each is answered empty
    m = b.parts.master_duties(b.not_writable_reason) if b.writable() else None
    keep = []
    dry: set[tuple[str, str]] = set()      # (group, topic) where a hold found nothing
    now_ms = _now_ms()
    for h in holds:
        if m is None:
            b.answers.reply_held(h.identity, h.request_id, pb.POP, pb.NO_NEW_MESSAGE, "",
                                   pb.PopResponse())
            continue
        key = (h.request.consumer_group, h.request.topic)
        wanted = h.request.topic in topics if topics is not None else \
            m.share.book.due_by(key, now_ms)
        if not wanted or key in dry:
            if topics is None and now >= h.deadline:
                b.answers.reply_held(h.identity, h.request_id, pb.POP, pb.NO_NEW_MESSAGE, "",
                                       pb.PopResponse())
            else:
                keep.append(h)
            continue
        queues = b.hosted_queues(h.request.topic) or 0
        try:
            found, answer = _serve(b, m, h.identity, h.request_id, h.request, queues,
                                   h.owner) if queues else (False, None)
        except Exception as exc:  # noqa: BLE001 - answered with its status
            b.answers.reply_held(h.identity, h.request_id, pb.POP, *answer_for(exc), None)
            continue
        if found:
            if answer is not None:
                b.answers.reply_held(h.identity, h.request_id, pb.POP, *answer)
            continue
        dry.add(key)
        if topics is None and now >= h.deadline:
            b.answers.reply_held(h.identity, h.request_id, pb.POP, pb.NO_NEW_MESSAGE, "",
                                   pb.PopResponse())
        else:
            keep.append(h)
    if topics is None and m is not None:
        for key in dry:                          # looked at: the exact time of the next due
            m.share.book.settle_due(key)
    b.pop_hold.keep_only(keep)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
