"""``duomq cluster remove-group GROUP``: forget a broker group that has no
broker (retired, or registered by mistake): its nodes in ZooKeeper go, and
every topic that had queues on it loses them. Refused while any broker of
the group is registered, or while a topic lives on that group alone."""

from __future__ import annotations

from kazoo.exceptions import NoNodeError

from duomq.cli.common import add_endpoint, add_json, emit, endpoint
from duomq.common.errors import ConfigError
from duomq.common.names import validate_name
from duomq.coordinator import zk as zkutil
from duomq.coordinator.paths import ZkPaths
from duomq.coordinator.topics import TopicAdmin


def add(sub) -> None:
    p = sub.add_parser("cluster", help="the cluster's broker groups")
    csub = p.add_subparsers(dest="cluster_cmd", required=True)
    q = csub.add_parser("remove-group", help="forget a broker group with no broker: its "
                        "ZooKeeper nodes, and its queues on every topic")
    q.add_argument("group", help="the broker group, e.g. broker-c")
    q.add_argument("--dry-run", action="store_true", help="say what would go, change nothing")
    add_endpoint(q)
    add_json(q)
    q.set_defaults(func=run)


def plan(zk, cluster: str, group: str) -> dict:
    """What removing ``group`` does, or ConfigError saying why it may not."""
    validate_name("broker group", group)
    paths, admin = ZkPaths(cluster), TopicAdmin(zk, cluster)
    known = admin.broker_groups()
    if group not in known:
        raise ConfigError(f"no broker group {group!r} in cluster {cluster!r} (its broker "
                          f"groups: {', '.join(known) or 'none'})")
    try:
        members = sorted(zk.get_children(paths.members(group)))
    except NoNodeError:
        members = []
    if members:
        raise ConfigError(f"broker group {group!r} has registered broker(s) {', '.join(members)}: "
                          f"stop them first (a live group is not removed)")
    topics = {name: admin.describe(name) for name in admin.list()}
    alone = sorted(n for n, cfg in topics.items() if set(cfg.queues) == {group})
    if alone:
        raise ConfigError(f"topic(s) {', '.join(alone)} live on {group!r} alone: delete them "
                          f"or put them on another group first (duomq topic update T "
                          f"--groups ...)")
    return {"group": group, "topics": sorted(n for n, cfg in topics.items()
                                             if group in cfg.queues)}


def run(args) -> int:
    zookeeper, cluster = endpoint(args)
    zk = zkutil.connect(zookeeper, cluster=cluster)
    try:
        out = plan(zk, cluster, args.group)
        if not args.dry_run:
            TopicAdmin(zk, cluster).drop_group(args.group)
            try:
                zk.delete(ZkPaths(cluster).broker_group(args.group), recursive=True)
            except NoNodeError:
                pass
    finally:
        zkutil.close(zk)
    out["removed"] = not args.dry_run
    if args.json:
        emit(out)
    else:
        topics = ", ".join(out["topics"]) or "no topic"
        print(f"{'would remove' if args.dry_run else 'removed'} broker group {args.group} "
              f"(its queues on {topics})" + ("; dry run: nothing changed" if args.dry_run else ""))
    return 0
