"""``duomq topic create|update|delete|list|describe``."""

from __future__ import annotations

from duomq.cli.common import add_endpoint, add_json, emit, endpoint, table
from duomq.coordinator import zk as zkutil
from duomq.coordinator.topics import TopicAdmin


def add(sub) -> None:
    p = sub.add_parser("topic", help="create, update, delete, list and describe topics")
    tsub = p.add_subparsers(dest="topic_cmd", required=True)
    for name in ("create", "update", "delete", "list", "describe"):
        q = tsub.add_parser(name)
        if name != "list":
            q.add_argument("name")
        if name in ("create", "update"):
            q.add_argument("--queues", type=int, default=8 if name == "create" else None,
                           help="queues per broker group (default 8)")
            q.add_argument("--groups", help="comma-separated broker groups (default: all registered)")
            q.add_argument("--order", action="store_true", help="mark the topic as ordered")
        add_endpoint(q)
        add_json(q)
        q.set_defaults(func=run)


def run(args) -> int:
    zookeeper, cluster = endpoint(args)
    zk = zkutil.connect(zookeeper, cluster=cluster)
    try:
        admin = TopicAdmin(zk, cluster)
        groups = args.groups.split(",") if getattr(args, "groups", None) else None
        if args.topic_cmd == "create":
            cfg = admin.create(args.name, args.queues, groups, order=args.order)
        elif args.topic_cmd == "update":
            cfg = admin.update(args.name, args.queues, groups, order=args.order or None)
        elif args.topic_cmd == "delete":
            admin.delete(args.name)
            emit({"deleted": args.name}) if args.json else print(f"deleted topic {args.name}")
            return 0
        elif args.topic_cmd == "list":
            names = admin.list()
            emit({"topics": names}) if args.json else print("\n".join(names))
            return 0
        else:
            cfg = admin.describe(args.name)
        out = {"topic": cfg.name, "queues": cfg.queues, "total_queues": cfg.total_queues,
               "perm": cfg.perm, "order": cfg.order}
        if args.json:
            emit(out)
        else:
            print(f"topic {cfg.name} ({cfg.total_queues} queues, perm {cfg.perm}, "
                  f"{'ordered' if cfg.order else 'unordered'})")
            print(table([[g, n] for g, n in sorted(cfg.queues.items())], ["broker group", "queues"]))
    finally:
        zkutil.close(zk)
    return 0
