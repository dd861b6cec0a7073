"""``duomq group list|describe|lag|reset``: consumer groups and their
positions (as Kafka's ``kafka-consumer-groups.sh`` and RocketMQ's
``mqadmin consumerProgress``).

``list``: every group a master keeps offsets for or that has live members.
``describe GROUP``: its live members (what each subscribes to and the queues
each holds), and per queue the committed offset, the queue's end and the
lag. ``reset GROUP --topic T --to earliest|latest|offset N|timestamp T|shift
N [--queue Q] [--dry-run]`` moves the group: it commits the new offsets on
the masters and publishes them in ZooKeeper, where every live member picks
them up and moves the queues it holds (``client.cluster.offset_reset``).
"""

from __future__ import annotations

import argparse

from duomq.cli.common import add_endpoint, add_json, emit, endpoint, table, time_arg
from duomq.common.errors import ConfigError, DuomqError
from duomq.common.message import MessageQueue

TO = ("earliest", "latest", "offset", "timestamp", "shift")


def add(sub) -> None:
    p = sub.add_parser("group", help="consumer groups: list, describe, lag, reset offsets")
    verbs = p.add_subparsers(dest="verb", required=True)
    ls = verbs.add_parser("list", help="every consumer group the cluster knows")
    ds = verbs.add_parser("describe", help="a group's members, the queues each holds, and its "
                          "committed offsets and lag per queue")
    lag = verbs.add_parser("lag", help="committed offset, newest offset and lag per queue")
    dl = verbs.add_parser("delete", help="forget a group with no live member: its committed "
                          "offsets on every master, its nodes in ZooKeeper")
    dl.add_argument("group_name", metavar="GROUP")
    dl.add_argument("--group", help=argparse.SUPPRESS)
    dl.add_argument("--force", action="store_true",
                    help="also a share group that has readers (what they hold is delivered "
                         "again, from the group's start)")
    rs = verbs.add_parser("reset", aliases=["reset-offset"],
                          help="move the group's committed offsets of a topic")
    for q in (ds, lag):
        q.add_argument("group_name", nargs="?", metavar="GROUP")
        q.add_argument("--group", help=argparse.SUPPRESS)
        q.add_argument("--topic", help="only this topic (default: every topic the group has "
                       "committed offsets for)")
    rs.add_argument("group_name", nargs="?", metavar="GROUP")
    rs.add_argument("--group", help=argparse.SUPPRESS)
    rs.add_argument("--topic", required=True)
    rs.add_argument("--to", nargs="+", metavar="WHERE",
                    help="earliest | latest | offset N | timestamp TIME | shift N")
    rs.add_argument("--timestamp", type=time_arg, metavar="TIME",
                    help="as --to timestamp TIME (epoch ms, ISO 8601 or a time ago: 30m, 2h)")
    rs.add_argument("--queue", metavar="GROUP/ID", help="only this queue")
    rs.add_argument("--dry-run", action="store_true", help="show the new offsets, change nothing")
    for q in (ls, ds, dl, lag, rs):
        add_endpoint(q)
        add_json(q)
    dl.set_defaults(func=delete)
    ls.set_defaults(func=list_)
    ds.set_defaults(func=describe)
    lag.set_defaults(func=lag_)
    rs.set_defaults(func=reset)


def _group(args) -> str:
    group = args.group_name or args.group
    if not group:
        raise ConfigError("name the consumer group: duomq group "
                          f"{args.verb} GROUP")
    return group


def known_groups(zookeeper: str, cluster: str, zk) -> dict[str, dict]:
    """Consumer groups by name: the topics masters keep their offsets of, and
    their live members."""
    from kazoo.exceptions import NoNodeError

    from duomq.cli.status_cmd import collect
    from duomq.client.cluster.membership import list_members
    from duomq.coordinator.paths import ZkPaths
    out: dict[str, dict] = {}
    for x in collect(zookeeper, cluster)["consumer_lag"]:
        g = out.setdefault(x["consumer_group"], {"topics": set(), "lag": 0})
        g["topics"].add(x["topic"])
        g["lag"] += x["lag"]
    try:
        names = zk.get_children(ZkPaths(cluster).consumer_groups)
    except NoNodeError:
        names = []
    for name in names:
        out.setdefault(name, {"topics": set(), "lag": 0})
    for name, g in out.items():
        g["members"] = len(list_members(zk, cluster, name))
    return out


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


def share_rows(c, group: str) -> list[dict]:
    """What each master holds of share group ``group``, per queue it read."""
    from duomq.proto import pb
    rows = []
    for member in c.registered_brokers():
        if not (member.is_master and member.address):
            continue
        try:
            status, _error, resp = c.remoting.call(member.address, pb.BROKER_STATUS,
                                                   pb.BrokerStatusRequest(), 5)
        except DuomqError:
            continue                      # an unreachable master: `duomq status` says so
        if status != pb.OK:
            continue
        rows += [{"topic": s.topic, "broker_group": resp.broker_group, "queue": s.queue_id,
                  "start_offset": s.start_offset, "next_offset": s.next_offset, "held": s.held,
                  "oldest_held_ms": s.oldest_held_ms, "redelivered": s.redelivered}
                 for s in resp.share_queues if s.consumer_group == group]
    return sorted(rows, key=lambda r: (r["topic"], r["broker_group"], r["queue"]))


def list_(args) -> int:
    from duomq.coordinator import zk as zkutil
    zookeeper, cluster = endpoint(args)
    zk = zkutil.connect(zookeeper, cluster=cluster)
    try:
        groups = known_groups(zookeeper, cluster, zk)
    finally:
        zkutil.close(zk)
    rows = [{"group": n, "members": g["members"], "topics": sorted(g["topics"]),
             "lag": g["lag"]} for n, g in sorted(groups.items())]
    if args.json:
        emit({"groups": rows})
    else:
        print(table([[r["group"], r["members"], ",".join(r["topics"]) or "-", r["lag"]]
                     for r in rows], ["group", "members", "topics", "lag"]))
    return 0


def describe(args) -> int:
    from duomq.client import PullConsumer
    from duomq.client.cluster.queue_owners import QueueOwners
    from duomq.coordinator.group_nodes import GroupMemberNode
    from duomq.coordinator.paths import ZkPaths
    zookeeper, cluster = endpoint(args)
    group = _group(args)
    with PullConsumer(group, zookeeper=zookeeper, cluster=cluster) as c:
        paths = ZkPaths(cluster)
        members: dict[str, dict] = {}
        for client_id in sorted(_children(c.zk, paths.group_members(group))):
            raw = _data(c.zk, f"{paths.group_members(group)}/{client_id}")
            node = GroupMemberNode.from_bytes(raw) if raw else None
            members[client_id] = {"topic": node.topic if node else "",
                                  "model": node.model if node else "", "queues": []}
        owners = QueueOwners(c.zk, cluster, group, "duomq-admin", lambda: None).owners()
        holder = {}
        for name, client_id in owners.items():
            holder[name] = client_id
            if client_id in members:
                members[client_id]["queues"].append(name.replace("@", "/"))
        topics = [args.topic] if args.topic else \
            sorted(set(group_topics(zookeeper, cluster, group))
                   | {m["topic"] for m in members.values() if m["topic"]})
        rows = lag_rows(c, topics)
        shared = share_rows(c, group)
    if not members and not rows and not shared:
        raise ConfigError(f"no consumer group {group!r} in this cluster (no live member, no "
                          f"committed offset): `duomq group list` shows the groups there are")
    for r in rows:
        r["owner"] = holder.get(f"{r['topic']}@{r['broker_group']}@{r['queue']}", "")
    total = sum(r["lag"] or 0 for r in rows)
    if args.json:
        emit({"group": group, "members": members, "queues": rows, "total_lag": total,
              "share": shared})
        return 0
    if shared:
        print(f"share group {group}: {sum(r['held'] for r in shared)} message(s) in flight, "
              f"oldest {max(r['oldest_held_ms'] for r in shared) / 1000:.1f} s, "
              f"{sum(r['redelivered'] for r in shared)} redelivered")
        print(table([[r["topic"], r["broker_group"], r["queue"], r["start_offset"],
                      r["next_offset"], r["held"], f"{r['oldest_held_ms'] / 1000:.1f}",
                      r["redelivered"]] for r in shared],
                    ["topic", "broker group", "queue", "start", "next", "in flight",
                     "oldest s", "redelivered"]))
        if not members and not rows:
            return 0
    print(f"group {group}: {len(members)} live member(s), total lag {total}")
    for cid, m in members.items():
        print(f"  {cid}  {m['topic']} ({m['model'].lower()})  queues: "
              f"{', '.join(sorted(m['queues'])) or '-'}")
    print(table([[r["topic"], r["broker_group"], r["queue"],
                  r["offset"] if r["offset"] >= 0 else "-", r["max_offset"],
                  "-" if r["lag"] is None else r["lag"], r["owner"] or "-"] for r in rows],
                ["topic", "broker group", "queue", "offset", "max", "lag", "owner"]))
    return 0


def _children(zk, path: str) -> list[str]:
    from kazoo.exceptions import NoNodeError
    try:
        return zk.get_children(path)
    except NoNodeError:
        return []


def _data(zk, path: str) -> bytes | None:
    from kazoo.exceptions import NoNodeError
    try:
        return zk.get(path)[0]
    except NoNodeError:
        return None


def lag_(args) -> int:
    from duomq.client import PullConsumer
    from duomq.client.cluster.membership import list_members
    zookeeper, cluster = endpoint(args)
    group = _group(args)
    topics = [args.topic] if args.topic else group_topics(zookeeper, cluster, group)
    with PullConsumer(group, zookeeper=zookeeper, cluster=cluster) as c:
        rows = lag_rows(c, topics)
        members = list_members(c.zk, cluster, group)
    total = sum(r["lag"] or 0 for r in rows)
    if args.json:
        emit({"group": group, "members": len(members), "queues": rows, "total_lag": total})
        return 0
    print(table([[r["topic"], r["broker_group"], r["queue"],
                  r["offset"] if r["offset"] >= 0 else "-", r["max_offset"],
                  "-" if r["lag"] is None else r["lag"]] for r in rows],
                ["topic", "broker group", "queue", "offset", "max", "lag"]))
    print(f"group {group}: {len(members)} live member(s), total lag {total}"
          + ("" if topics else " (no committed offsets)"))
    return 0


def parse_to(args) -> tuple[str, int | None]:
    """``--to WHERE [VALUE]`` (or ``--timestamp T``) as (how, value)."""
    if args.to is None:
        if args.timestamp is None:
            raise ConfigError("say where to: --to earliest|latest|offset N|timestamp TIME|"
                              "shift N")
        return "timestamp", args.timestamp
    how, *rest = args.to
    if how not in TO:
        raise ConfigError(f"--to {how}: not one of {', '.join(TO)}")
    if how in ("earliest", "latest"):
        if rest:
            raise ConfigError(f"--to {how} takes no value")
        return how, None
    if len(rest) != 1:
        raise ConfigError(f"--to {how} takes one value")
    if how == "timestamp":
        try:
            return how, time_arg(rest[0])
        except argparse.ArgumentTypeError as exc:
            raise ConfigError(f"--to timestamp: {exc}") from None
    try:
        value = int(rest[0])
    except ValueError:
        raise ConfigError(f"--to {how} {rest[0]}: not a whole number") from None
    if how == "offset" and value < 0:
        raise ConfigError(f"--to offset {value}: offsets start at 0")
    return how, value


def plan_reset(how: str, value: int | None, low: int, high: int, committed: int,
               by_time: int | None) -> int:
    """Where one queue moves (pure): within [low, high], the queue's first
    and one past its last offset."""
    if how == "earliest":
        return low
    if how == "latest":
        return high
    if how == "timestamp":
        assert by_time is not None
        return min(max(by_time, low), high)
    assert value is not None
    target = value if how == "offset" else (committed if committed >= 0 else low) + value
    return min(max(target, low), high)


def reset(args) -> int:
    from duomq.client import PullConsumer
    from duomq.client.cluster import offset_reset
    from duomq.client.cluster.membership import list_members
    zookeeper, cluster = endpoint(args)
    group = _group(args)
    how, value = parse_to(args)
    with PullConsumer(group, zookeeper=zookeeper, cluster=cluster) as c:
        mqs = c.queues(args.topic)
        if args.queue:
            mqs = [mq for mq in mqs if f"{mq.broker_group}/{mq.queue_id}" == args.queue]
            if not mqs:
                raise ConfigError(f"--queue {args.queue}: topic {args.topic!r} has no such queue "
                                  f"(GROUP/ID, e.g. {_example(c.queues(args.topic))})")
        before = {mq: c.committed(mq) for mq in mqs}
        plan = {mq: plan_reset(how, value, c.min_offset(mq), c.max_offset(mq), before[mq],
                               c.offset_by_time(mq, value) if how == "timestamp" and value
                               is not None else None) for mq in mqs}
        members = list_members(c.zk, cluster, group)
        if not args.dry_run:
            c.commit(plan)
            offset_reset.publish(c.zk, cluster, group, args.topic, plan,
                                 value if how == "timestamp" and value is not None else 0)
    rows = [{"topic": mq.topic, "broker_group": mq.broker_group, "queue": mq.queue_id,
             "old_offset": before[mq], "new_offset": plan[mq]} for mq in mqs]
    if args.json:
        emit({"group": group, "topic": args.topic, "to": how, "value": value,
              "timestamp_ms": value if how == "timestamp" else None,
              "dry_run": args.dry_run, "members": len(members), "queues": rows})
        return 0
    print(table([[r["broker_group"], r["queue"], r["old_offset"] if r["old_offset"] >= 0 else "-",
                  r["new_offset"]] for r in rows], ["broker group", "queue", "old", "new"]))
    if args.dry_run:
        print("dry run: nothing changed")
    else:
        print(f"group {group} reset on {len(rows)} queue(s) of {args.topic}; "
              f"{len(members)} live member(s) move their queues there")
    return 0


def _example(mqs: list[MessageQueue]) -> str:
    return f"{mqs[0].broker_group}/{mqs[0].queue_id}" if mqs else "broker-a/0"


def delete(args) -> int:
    """Kafka's ``--delete``: only a group no member uses. Its offsets go from
    every master (and so from their slaves), then its ZooKeeper nodes."""
    from kazoo.exceptions import NoAuthError, NoNodeError

    from duomq.client import PullConsumer
    from duomq.client.base import raise_for
    from duomq.client.cluster.membership import list_members
    from duomq.coordinator import zk as zkutil
    from duomq.coordinator.paths import ZkPaths
    from duomq.proto import pb
    zookeeper, cluster = endpoint(args)
    group = _group(args)
    removed: dict[str, int] = {}
    with PullConsumer("duomq-admin", zookeeper=zookeeper, cluster=cluster) as c:
        members = list_members(c.zk, cluster, group)
        if members:
            raise ConfigError(f"consumer group {group!r} has {len(members)} live member(s) "
                              f"({', '.join(members[:3])}{', ...' if len(members) > 3 else ''}): "
                              f"stop them first")
        paths = ZkPaths(cluster)
        masters: dict[str, str] = {}
        for broker_group in sorted(_children(c.zk, paths.brokers)):
            live = [m for m in zkutil.read_members(c.zk, paths, broker_group).values()
                    if m.is_master and m.address]
            if not live:
                raise ConfigError(f"broker group {broker_group!r} has no live master: its "
                                  f"offsets of {group!r} cannot be deleted now")
            masters[broker_group] = live[0].address
        # every master asked first, so that a refusal changes nothing anywhere
        for broker_group, address in masters.items():
            status, error, resp = c.remoting.call(
                address, pb.DELETE_GROUP, pb.DeleteGroupRequest(consumer_group=group, check=True),
                10)
            raise_for(status, error)
            if resp.share_readers and not args.force:
                raise ConfigError(f"share group {group!r} has {resp.share_readers} reader(s) "
                                  f"on {broker_group} ({resp.readers}): stop them first, or "
                                  f"--force (what they hold is delivered again)")
        for broker_group, address in masters.items():
            status, error, resp = c.remoting.call(
                address, pb.DELETE_GROUP, pb.DeleteGroupRequest(consumer_group=group,
                                                                force=args.force), 10)
            raise_for(status, error)
            removed[broker_group] = resp.queues
        node = f"{paths.consumer_groups}/{group}"
        nodes = c.zk.exists(node) is not None   # kazoo's recursive delete of none says nothing
        if nodes:
            try:
                c.zk.delete(node, recursive=True)
            except NoNodeError:
                pass
            except NoAuthError:     # a secured cluster's group nodes: an admin's to delete
                nodes = False
    if not any(removed.values()) and not nodes:
        raise ConfigError(f"no consumer group {group!r} in this cluster (no committed offset, "
                          f"no node)")
    if args.json:
        emit({"group": group, "offsets_removed": removed, "nodes_removed": nodes})
    else:
        print(f"deleted consumer group {group}: " + ", ".join(
            f"{n} committed offset(s) on {g}" for g, n in removed.items()))
    return 0
