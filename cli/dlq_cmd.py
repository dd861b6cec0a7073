"""``duomq dlq list|resend --group G``: a consumer group's dead letters.

A message lands in ``%DLQ%<group>`` after ``max_reconsume_times`` failed
retries (or when orderly consumption gives it up). ``list`` reads them all;
``resend`` sends them (or the ones named by ``--id``) to their original topic
as new messages, for the group to consume again once it is fixed. The dead
letters stay where they are, as a log does.
"""

from __future__ import annotations

import sys

from duomq.cli.common import add_endpoint, add_json, emit, endpoint, message_json
from duomq.common import delay as d

SYSTEM_PROPERTIES = frozenset((d.RETRY_TOPIC, d.RECONSUME_TIME, d.ORIGIN_MESSAGE_ID)) | d.SCHEDULING


def add(sub) -> None:
    p = sub.add_parser("dlq", help="read and resend a consumer group's dead letters")
    verbs = p.add_subparsers(dest="verb", required=True)
    ls = verbs.add_parser("list", help="every dead letter of the group")
    rs = verbs.add_parser("resend", help="send dead letters to their original topic again")
    for q in (ls, rs):
        q.add_argument("--group", required=True, help="consumer group")
        add_endpoint(q)
        add_json(q)
    rs_which = rs.add_mutually_exclusive_group(required=True)
    rs_which.add_argument("--id", dest="ids", action="append", metavar="ID",
                          help="a dead letter's message id (repeatable)")
    rs_which.add_argument("--all", action="store_true", help="every dead letter")
    ls.set_defaults(func=list_)
    rs.set_defaults(func=resend)


def dead_letters(c, group: str) -> list:
    from duomq.client import PullStatus
    from duomq.common.errors import TopicNotExistError
    from duomq.common.names import DLQ_PREFIX
    out = []
    try:
        mqs = c.queues(DLQ_PREFIX + group)
    except TopicNotExistError:           # made at the group's first dead letter
        return []
    for mq in mqs:
        off = c.min_offset(mq)
        while True:
            r = c.pull(mq, off, max_messages=256)
            if r.status is PullStatus.NO_NEW_MESSAGE:
                break
            out += r.messages
            off = r.next_offset
    return out


def _row(m) -> dict:
    return {**message_json(m), "original_topic": m.properties.get(d.RETRY_TOPIC, ""),
            "original_id": m.properties.get(d.ORIGIN_MESSAGE_ID, ""),
            "reconsume_times": m.reconsume_times}


def list_(args) -> int:
    from duomq.client import PullConsumer
    zookeeper, cluster = endpoint(args)
    with PullConsumer(args.group, zookeeper=zookeeper, cluster=cluster) as c:   # its own DLQ: its right
        letters = dead_letters(c, args.group)
    for m in letters:
        row = _row(m)
        if args.json:
            emit(row)
        else:
            print(f"{m.msg_id}  {row['original_topic']}  retried {m.reconsume_times}  "
                  f"{m.body[:80]!r}")
    if not args.json:
        print(f"{len(letters)} dead letters in %DLQ%{args.group}", file=sys.stderr)
    return 0


def resend(args) -> int:
    from duomq.client import Message, Producer, PullConsumer
    from duomq.common.errors import BadRequestError
    zookeeper, cluster = endpoint(args)
    with PullConsumer(args.group, zookeeper=zookeeper, cluster=cluster) as c:
        if args.all:
            letters = dead_letters(c, args.group)
        else:
            letters = [c.get_message(i) for i in args.ids]
    for m in letters:
        if not m.topic.startswith("%DLQ%") or d.RETRY_TOPIC not in m.properties:
            raise BadRequestError(f"{m.msg_id} is not a dead letter (topic {m.topic})")
    with Producer(zookeeper=zookeeper, cluster=cluster) as p:
        for m in letters:
            props = {k: v for k, v in m.properties.items() if k not in SYSTEM_PROPERTIES}
            r = p.send(Message(m.properties[d.RETRY_TOPIC], m.body, tags=m.tags, keys=m.keys,
                               properties=props))
            out = {"dead_letter": m.msg_id, "topic": m.properties[d.RETRY_TOPIC],
                   "msg_id": r.msg_id, "status": r.status.value}
            emit(out) if args.json else print(f"{m.msg_id} -> {out['topic']} {r.msg_id} "
                                              f"{out['status']}")
    return 0
