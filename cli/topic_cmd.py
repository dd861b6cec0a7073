"""``duomq topic create|update|delete|list|describe``."""

from __future__ import annotations

from duomq.cli.common import add_endpoint, add_json, emit, endpoint, table
from duomq.common.errors import ConfigError, DuomqError
from duomq.common.message import MessageQueue
from duomq.common.names import reserved
from duomq.coordinator import zk as zkutil
from duomq.coordinator.topics import TopicAdmin, TopicConfig


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
            q.add_argument("--groups", help="comma-separated broker groups (create: default "
                           "all registered; update: the topic's groups from now on, default "
                           "unchanged)")
            q.add_argument("--order", action="store_true", help="mark the topic as ordered")
        if name == "list":
            q.add_argument("--all", action="store_true",
                           help="also the groups' retry and dead-letter topics and the "
                                "broker's own")
        if name == "update":
            q.add_argument("--force", action="store_true",
                           help="shrink an ordered topic (keys move to other queues; the "
                                "backlog of the queues dropped is stranded), or take a broker "
                                "group off the topic (its queues' backlog is no longer read)")
        add_endpoint(q)
        add_json(q)
        q.set_defaults(func=run)


def run(args) -> int:
    zookeeper, cluster = endpoint(args)
    zk = zkutil.connect(zookeeper, cluster=cluster)
    try:
        admin = TopicAdmin(zk, cluster)
        groups = args.groups.split(",") if getattr(args, "groups", None) else None
        if groups:
            _known_groups(admin, groups)
        if args.topic_cmd == "create":
            cfg = admin.create(args.name, args.queues, groups, order=args.order)
        elif args.topic_cmd == "update":
            old = admin.describe(args.name)
            if args.queues is not None and not args.force:
                _refuse_shrinking_an_ordered_topic(old, args.queues, groups)
            dropped = sorted(set(old.queues) - set(groups)) if groups else []
            if dropped and not args.force:
                raise ConfigError(f"--groups takes {', '.join(dropped)} off topic "
                                  f"{args.name!r}: its queues there are no longer read or "
                                  f"written (their backlog stays on disk); pass --force to do it")
            cfg = admin.update(args.name, args.queues, groups, order=args.order or None)
        elif args.topic_cmd == "delete":
            admin.delete(args.name)
            emit({"deleted": args.name}) if args.json else print(f"deleted topic {args.name}")
            return 0
        elif args.topic_cmd == "list":
            names = [n for n in admin.list() if args.all or not reserved(n)]
            emit({"topics": names}) if args.json else print("\n".join(names))
            return 0
        else:
            cfg = admin.describe(args.name)
            return _describe(cfg, zookeeper, cluster, zk, args.json)
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


def _known_groups(admin: TopicAdmin, groups: list[str]) -> None:
    """Every broker group named must have registered: a typo would give a
    topic no broker serves."""
    known = admin.broker_groups()
    unknown = [g for g in groups if g not in known]
    if unknown:
        raise ConfigError(f"no broker group {', '.join(map(repr, unknown))} in this cluster "
                          f"(its broker groups: {', '.join(known) or 'none yet'})")


def _refuse_shrinking_an_ordered_topic(cfg: TopicConfig, queues: int,
                                       groups: list[str] | None) -> None:
    shrunk = {g: (n, queues) for g, n in cfg.queues.items()
              if (groups is None or g in groups) and queues < n}
    if cfg.order and shrunk:
        what = "; ".join(f"{g}: queues {new}..{old - 1} dropped" for g, (old, new) in
                         sorted(shrunk.items()))
        raise ConfigError(f"topic {cfg.name!r} is ordered: shrinking it moves keys to other "
                          f"queues (their order breaks across the move) and strands what the "
                          f"dropped queues hold ({what}); pass --force to do it anyway")


def _describe(cfg: TopicConfig, zookeeper: str, cluster: str, zk, as_json: bool) -> int:
    """A topic's queues with their min and max offsets and the master serving
    each broker group's (an unreachable group's are left out, with why)."""
    from duomq.client import PullConsumer
    from duomq.proto import pb
    rows: list[dict] = []
    problems: dict[str, str] = {}
    timers: dict[str, int] = {}
    with PullConsumer("duomq-admin", zookeeper=zookeeper, cluster=cluster, zk=zk) as c:
        for group, n in sorted(cfg.queues.items()):
            try:
                master = c.master_address(group, cfg.name)
                for q in range(n):
                    mq = MessageQueue(cfg.name, group, q)
                    rows.append({"group": group, "queue": q, "min_offset": c.min_offset(mq),
                                 "max_offset": c.max_offset(mq), "master": master})
                status, error, resp = c.remoting.call(master, pb.BROKER_STATUS,
                                                      pb.BrokerStatusRequest(), 5)
                if status != pb.OK:
                    raise DuomqError(f"status of {master}: {error}")
                timers[group] = resp.timers_pending.get(cfg.name, 0)
            except DuomqError as exc:
                problems[group] = str(exc)
    out = {"topic": cfg.name, "queues": cfg.queues, "total_queues": cfg.total_queues,
           "perm": cfg.perm, "order": cfg.order, "queue_offsets": rows,
           "timers_pending": timers, "unreachable": problems}
    if as_json:
        emit(out)
        return 0
    print(f"topic {cfg.name} ({cfg.total_queues} queues, perm {cfg.perm}, "
          f"{'ordered' if cfg.order else 'unordered'})")
    print(table([[r["group"], r["queue"], r["min_offset"], r["max_offset"],
                  r["max_offset"] - r["min_offset"], r["master"]] for r in rows],
                ["broker group", "queue", "min", "max", "messages", "master"]))
    if any(timers.values()):
        print("timer messages pending: " + ", ".join(
            f"{g} {n:,}" for g, n in sorted(timers.items())))
    for group, why in sorted(problems.items()):
        print(f"{group}: {why}")
    return 0
