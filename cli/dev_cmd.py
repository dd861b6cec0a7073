"""``duomq dev up|status|down``: a local cluster in the background."""

from __future__ import annotations

import sys

from duomq.cli.common import add_endpoint, add_json, emit, table
from duomq.common.config import BrokerConfig, parse_settings
from duomq.common.endpoint import default_dev_dir


def add(sub) -> None:
    p = sub.add_parser("dev", help="a local ZooKeeper and brokers in the background")
    dsub = p.add_subparsers(dest="dev_cmd", required=True)
    for name, helptext in (("up", "start ZooKeeper and brokers; return once they serve"),
                           ("status", "show what runs"), ("down", "stop everything dev up started"),
                           ("env", "print how to reach the dev cluster: eval \"$(duomq dev env)\"")):
        q = dsub.add_parser(name, help=helptext)
        q.add_argument("--data-dir", default=default_dev_dir(),
                       help="where state, logs and stores live (default ~/.duomq/dev "
                            "or $DUOMQ_DEV_DIR)")
        add_endpoint(q)
        add_json(q)
        if name == "up":
            q.add_argument("--groups", type=int, default=1, help="broker groups (default 1)")
            q.add_argument("--slaves", type=int, default=0, help="slaves per group (default 0)")
            q.add_argument("--flush", choices=["sync", "async"], default="async")
            q.add_argument("--replication", choices=["sync", "async"], default="async")
            q.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                           help="broker config field for every broker (repeatable)")
            q.add_argument("--auth", action="store_true",
                           help="a secured cluster: keys in DATA_DIR/auth, auth = true on every "
                                "broker; the CLI uses the admin's credentials on it")
            q.add_argument("--zookeepers", type=int, default=1, choices=[1, 3, 5],
                           help="ZooKeeper servers: 3 or 5 run an ensemble (default 1)")
            q.add_argument("--proxy", action="store_true",
                           help="also start a `duomq proxy` (RocketMQ 5's gRPC protocol, for "
                                "the official clients); dev env exports it as DUOMQ_PROXY")
            q.add_argument("--store-size", metavar="SIZE",
                           help="give each broker's store a filesystem of its own of SIZE "
                                "(e.g. 256M; a loop-mounted ext4 image, root only), with "
                                "store files sized to it: for the disk-full-master drill")
        q.set_defaults(func=run)
    for name, helptext in (("kill", "kill -9 one broker (failover drills)"),
                           ("start", "start a stopped broker again"),
                           ("drop-cache", "drop one broker's commit log from the page cache "
                                          "(read-redirect drills)")):
        q = dsub.add_parser(name, help=helptext)
        q.add_argument("broker", help="GROUP/ID, e.g. broker-a/0")
        q.add_argument("--data-dir", default=default_dev_dir())
        if name == "kill":
            q.add_argument("--no-wait", action="store_true",
                           help="return once the broker is dead; by default the kill of a "
                                "master with a live slave returns once another broker is "
                                f"master (at most {TAKEOVER_WAIT_S:g} s)")
        add_json(q)
        q.set_defaults(func=run_one)


TAKEOVER_WAIT_S = 30.0


def run_one(args) -> int:
    from duomq.dev import cluster  # only the dev command loads the dev cluster
    if args.dev_cmd == "kill":
        out = cluster.kill_broker(args.data_dir, args.broker, 9,
                                  0 if args.no_wait else TAKEOVER_WAIT_S)
    else:
        fn = {"start": cluster.start_again, "drop-cache": cluster.drop_cache}[args.dev_cmd]
        out = fn(args.data_dir, args.broker)
    if args.json:
        emit(out)
        return 0 if out.get("new_master", "") is not None else 1
    if "new_master" in out:
        took = out.pop("took_s")
        now = out.pop("new_master")
        print(" ".join(f"{k}={v}" for k, v in out.items() if k != "epoch"))
        if now is None:
            print(f"no broker of the group took over in {took:g} s", file=sys.stderr)
            return 1
        print(f"{now} is master at epoch {out['epoch']}, {took:g} s after the kill")
        return 0
    print(" ".join(f"{k}={v}" for k, v in out.items()))
    return 0


def env_lines(st: dict) -> list[str]:
    """Shell lines that point every duomq command (and client) at the cluster."""
    lines = [f"export DUOMQ_ZOOKEEPER={st['zookeeper']}", f"export DUOMQ_CLUSTER={st['cluster']}",
             f"export DUOMQ_DEV_DIR={st['data_dir']}"]
    if st.get("credentials"):
        lines.append(f"export DUOMQ_CREDENTIALS={st['credentials']['admin']}")
    if st.get("proxy"):
        lines.append(f"export DUOMQ_PROXY={st['proxy']['address']}")
    return lines


def run(args) -> int:
    from duomq.dev import cluster, volumes
    if args.dev_cmd == "env":
        st = cluster.status(args.data_dir)
        if not st.get("running"):
            print(f"# no dev cluster in {st['data_dir']}: duomq dev up", flush=True)
            return 1
        print("\n".join(env_lines(st)))
        return 0
    if args.dev_cmd == "up":
        settings = parse_settings(BrokerConfig, args.set)
        st = cluster.up(args.data_dir, groups=args.groups, slaves=args.slaves, flush=args.flush,
                        replication=args.replication, zookeeper=args.zookeeper,
                        cluster=args.cluster or "DefaultCluster", settings=settings,
                        zookeepers=args.zookeepers,
                        store_size=volumes.parse_size(args.store_size) if args.store_size
                        else None, auth=args.auth, proxy=args.proxy)
    elif args.dev_cmd == "status":
        st = cluster.status(args.data_dir)
    else:
        st = cluster.down(args.data_dir)
        if args.json:
            emit(st)
        else:
            print("stopped: " + (", ".join(st["stopped"]) or "nothing was running"))
        return 0
    if args.json:
        emit(st)
    elif not st.get("running"):
        print(f"no dev cluster in {st['data_dir']}")
    else:
        print(f"zookeeper {st['zookeeper']}  cluster {st['cluster']}  data {st['data_dir']}")
        volumed = any("volume" in b for b in st["brokers"])
        print(table([[b["group"], b["id"], b["role"], b["address"], b["pid"],
                      "yes" if b["alive"] else "no",
                      *([_free(b)] if volumed else [])] for b in st["brokers"]],
                    ["group", "id", "role", "address", "pid", "alive",
                     *(["store free"] if volumed else [])]))
        if st.get("proxy"):
            p = st["proxy"]
            print(f"proxy {p['address']}  pid {p['pid']}  alive {'yes' if p['alive'] else 'no'}"
                  "  (RocketMQ 5 gRPC: the official clients' endpoint)")
        if args.dev_cmd == "up":
            print("\nevery duomq command finds this cluster; from another shell, or for "
                  "your own code:\n  eval \"$(duomq dev env" + (
                      f" --data-dir {st['data_dir']}" if args.data_dir != default_dev_dir()
                      else "") + ")\"\nor\n  " + "\n  ".join(env_lines(st)))
    return 0 if args.dev_cmd != "status" or st.get("running") else 1


def _free(b: dict) -> str:
    if "volume_free_bytes" not in b:
        return "-"
    return f"{b['volume_free_bytes'] / 2**20:.0f} of {b['volume_bytes'] / 2**20:.0f} MiB"
