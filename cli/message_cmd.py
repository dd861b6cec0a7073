"""``duomq message get ID``: a stored message by its id."""

from __future__ import annotations

from duomq.cli.common import add_endpoint, add_json, emit, endpoint, message_json


def add(sub) -> None:
    p = sub.add_parser("message", help="look up stored messages")
    verbs = p.add_subparsers(dest="verb", required=True)
    g = verbs.add_parser("get", help="a message by id (broker group:commit-log offset, as "
                         "send and consume print it)")
    g.add_argument("ids", nargs="+", metavar="ID")
    add_endpoint(g)
    add_json(g)
    g.set_defaults(func=get)


def get(args) -> int:
    from duomq.client import PullConsumer
    zookeeper, cluster = endpoint(args)
    with PullConsumer(zookeeper, cluster, group="duomq-admin") as c:
        for msg_id in args.ids:
            m = message_json(c.get_message(msg_id))
            if args.json:
                emit(m)
            else:
                print("\n".join(f"{k:>20}: {v}" for k, v in m.items()) + "\n")
    return 0
