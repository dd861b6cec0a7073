"""``duomq group lag|reset-offset``: a consumer group's position.

``lag`` shows, per queue, the group's committed offset, the queue's newest
visible offset and the difference. ``reset-offset --timestamp`` moves the
group, per queue, to the first message stored at or after a time (back to
consume again, or ahead to skip): it commits the offsets on the masters and
publishes them in ZooKeeper, where every live member of the group picks them
up and moves the queues it holds (``client.cluster.offset_reset``).
"""

from __future__ import annotations

from duomq.cli.common import add_endpoint, add_json, emit, endpoint, table, time_arg


def add(sub) -> None:
    p = sub.add_parser("group", help="a consumer group's offsets: lag, reset by time")
    verbs = p.add_subparsers(dest="verb", required=True)
    lag = verbs.add_parser("lag", help="committed offset, newest offset and lag per queue")
    lag.add_argument("--topic", help="only this topic (default: every topic the group has "
                     "committed offsets for)")
    rs = verbs.add_parser("reset-offset", help="move the group to the first message stored at "
                          "or after a time, on every queue of a topic")
    rs.add_argument("--topic", required=True)
    rs.add_argument("--timestamp", required=True, type=time_arg, metavar="TIME",
                    help="epoch ms, ISO 8601 (2026-11-22T10:00, local unless it names a zone) "
                         "or a time ago (30m, 2h, 1d)")
    rs.add_argument("--dry-run", action="store_true", help="show the new offsets, change nothing")
    for q in (lag, rs):
        q.add_argument("--group", required=True, help="consumer group")
        add_endpoint(q)
        add_json(q)
    lag.set_defaults(func=lag_)
    rs.set_defaults(func=reset)


def group_topics(zookeeper: str, cluster: str, group: str) -> list[str]:
    """Topics the group has committed offsets for, as the masters report them."""
    from duomq.cli.status_cmd import collect
    return sorted({x["topic"] for x in collect(zookeeper, cluster)["consumer_lag"]
                   if x["consumer_group"] == group})


def lag_rows(c, topics: list[str]) -> list[dict]:
    rows = []
    for topic in topics:
        for mq in c.queues(topic):
            committed, top = c.committed(mq), c.max_offset(mq)
            rows.append({"topic": topic, "broker_group": mq.broker_group, "queue": mq.queue_id,
                         "offset": committed, "max_offset": top,
                         "lag": max(0, top - committed) if committed >= 0 else None})
    return rows


def lag_(args) -> int:
    from duomq.client import PullConsumer
    from duomq.client.cluster.membership import list_members
    zookeeper, cluster = endpoint(args)
    topics = [args.topic] if args.topic else group_topics(zookeeper, cluster, args.group)
    with PullConsumer(zookeeper, cluster, group=args.group) as c:
        rows = lag_rows(c, topics)
        members = list_members(c.zk, cluster, args.group)
    total = sum(r["lag"] or 0 for r in rows)
    if args.json:
        emit({"group": args.group, "members": len(members), "queues": rows, "total_lag": total})
        return 0
    print(table([[r["topic"], r["broker_group"], r["queue"],
                  r["offset"] if r["offset"] >= 0 else "-", r["max_offset"],
                  "-" if r["lag"] is None else r["lag"]] for r in rows],
                ["topic", "broker group", "queue", "offset", "max", "lag"]))
    print(f"group {args.group}: {len(members)} live member(s), total lag {total}"
          + ("" if topics else " (no committed offsets)"))
    return 0


def reset(args) -> int:
    from duomq.client import PullConsumer
    from duomq.client.cluster import offset_reset
    from duomq.client.cluster.membership import list_members
    zookeeper, cluster = endpoint(args)
    with PullConsumer(zookeeper, cluster, group=args.group) as c:
        mqs = c.queues(args.topic)
        plan = {mq: c.offset_by_time(mq, args.timestamp) for mq in mqs}
        before = {mq: c.committed(mq) for mq in mqs}
        members = list_members(c.zk, cluster, args.group)
        if not args.dry_run:
            c.commit(plan)
            offset_reset.publish(c.zk, cluster, args.group, args.topic, plan, args.timestamp)
    rows = [{"topic": mq.topic, "broker_group": mq.broker_group, "queue": mq.queue_id,
             "old_offset": before[mq], "new_offset": plan[mq]} for mq in mqs]
    if args.json:
        emit({"group": args.group, "topic": args.topic, "timestamp_ms": args.timestamp,
              "dry_run": args.dry_run, "members": len(members), "queues": rows})
        return 0
    print(table([[r["broker_group"], r["queue"], r["old_offset"] if r["old_offset"] >= 0 else "-",
                  r["new_offset"]] for r in rows], ["broker group", "queue", "old", "new"]))
    if args.dry_run:
        print("dry run: nothing changed")
    else:
        print(f"group {args.group} reset on {len(rows)} queue(s) of {args.topic}; "
              f"{len(members)} live member(s) move their queues there")
    return 0
