"""``duomq message get ID`` and ``duomq message find --topic T --key K``:
stored messages by id, and by key through the brokers' key index;
``duomq message recall TOPIC HANDLE``: a timer message cancelled before it
comes due."""

from __future__ import annotations

from duomq.cli.common import add_endpoint, add_json, emit, endpoint, message_json, time_arg
from duomq.common.errors import ConfigError


def add(sub) -> None:
    p = sub.add_parser("message", help="look up stored messages")
    verbs = p.add_subparsers(dest="verb", required=True)
    g = verbs.add_parser("get", help="a message by id (broker group:epoch and commit-log "
                         "offset, as send and consume print it); MESSAGE_CUT when a failover "
                         "cut it")
    g.add_argument("ids", nargs="+", metavar="ID")
    f = verbs.add_parser("find", help="messages of a topic by key, newest first")
    f.add_argument("--topic", required=True)
    f.add_argument("--key", required=True, help="one key (a message's keys are separated "
                   "by spaces)")
    f.add_argument("--begin", type=time_arg, default=0, metavar="TIME",
                   help="stored at or after (epoch ms, ISO 8601, or a time ago: 2h)")
    f.add_argument("--end", type=time_arg, default=0, metavar="TIME",
                   help="stored at or before (default: now)")
    f.add_argument("--max", type=int, default=32, dest="max_num",
                   help="most messages (default 32, at most 64 per broker group)")
    r = verbs.add_parser("recall", help="cancel a timer message that has not come due, by "
                         "the recall handle its send printed (produce --json)")
    r.add_argument("topic", metavar="TOPIC")
    r.add_argument("handle", metavar="HANDLE")
    for q in (g, f, r):
        add_endpoint(q)
        add_json(q)
    g.set_defaults(func=get)
    f.set_defaults(func=find)
    r.set_defaults(func=recall)


def timer_state(m, now_ms: int) -> dict:
    """A stored timer message (in the timer topic): its topic and when it
    comes due, or came due (then it was delivered, unless it was recalled).
    Anything else: {}."""
    import time

    from duomq.common import delay as d
    from duomq.common.names import TIMER_TOPIC
    props = m.properties
    if m.topic != TIMER_TOPIC or d.RECALL_OF in props:
        return {}
    try:
        at = int(props[d.DELIVER_AT])
    except (KeyError, ValueError):
        return {}
    when = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(at / 1000)) + \
        f".{at % 1000:03d}"
    if at > now_ms:
        due = f"comes due {when} (in {(at - now_ms) / 1000:,.1f} s) on {props.get(d.REAL_TOPIC)}"
    else:
        due = (f"came due {when} ({(now_ms - at) / 1000:,.1f} s ago): delivered to "
               f"{props.get(d.REAL_TOPIC)} unless recalled")
    return {"timer_topic": props.get(d.REAL_TOPIC, ""), "deliver_at_ms": at, "due": due}


def _show(args, messages) -> None:
    import time
    now = int(time.time() * 1000)
    for m in messages:
        row = message_json(m)
        row.update(timer_state(m, now))
        if args.json:
            emit(row)
        else:
            print("\n".join(f"{k:>20}: {v}" for k, v in row.items()) + "\n")


def get(args) -> int:
    from duomq.client import PullConsumer
    zookeeper, cluster = endpoint(args)
    with PullConsumer("duomq-admin", zookeeper=zookeeper, cluster=cluster) as c:
        _show(args, [c.get_message(msg_id) for msg_id in args.ids])
    return 0


def find(args) -> int:
    from duomq.client import PullConsumer
    if args.begin and args.end and args.end < args.begin:
        raise ConfigError("--end is before --begin: nothing could match")
    if args.max_num < 1:
        raise ConfigError(f"--max must be at least 1, got {args.max_num}")
    zookeeper, cluster = endpoint(args)
    with PullConsumer("duomq-admin", zookeeper=zookeeper, cluster=cluster) as c:
        found = c.query_by_key(args.topic, args.key, args.begin, args.end, args.max_num)
    _show(args, found)
    if not args.json:
        print(f"{len(found)} message(s) with key {args.key!r} in {args.topic!r}")
    return 0


def recall(args) -> int:
    from duomq.client import Producer
    zookeeper, cluster = endpoint(args)
    with Producer(zookeeper=zookeeper, cluster=cluster) as p:
        msg_id = p.recall(args.topic, args.handle)
    if args.json:
        emit({"recalled": msg_id, "topic": args.topic})
    else:
        print(f"recalled {msg_id} of {args.topic!r}: it will not be delivered")
    return 0
