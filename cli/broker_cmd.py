"""``duomq broker``: run one broker in the foreground; ``duomq broker config
get|set``: a running broker's settings, and changing those that may change
at runtime (``broker/admin.py`` says which)."""

from __future__ import annotations

import logging
import os
from typing import Any

from duomq.cli.common import add_endpoint, add_json, emit, endpoint, table
from duomq.common.config import BrokerConfig, parse_settings
from duomq.common.errors import ConfigError


def add(sub) -> None:
    p = sub.add_parser("broker", help="run one broker in the foreground")
    p.add_argument("--config", default=os.environ.get("DUOMQ_CONFIG"),
                   help="TOML file with broker settings (default: $DUOMQ_CONFIG; see the README)")
    p.add_argument("--zookeeper")
    p.add_argument("--cluster")
    p.add_argument("--group", help="broker group name")
    p.add_argument("--broker-id", type=int)
    p.add_argument("--port", type=int)
    p.add_argument("--listen-host")
    p.add_argument("--data-dir")
    p.add_argument("--flush", help="SYNC_FLUSH or ASYNC_FLUSH")
    p.add_argument("--replication", help="SYNC or ASYNC")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="any other config field (repeatable)")
    p.add_argument("--log-level", default="INFO")
    p.set_defaults(func=run)
    sub_cmds = p.add_subparsers(dest="broker_cmd", metavar="config")
    cfg = sub_cmds.add_parser("config", help="a running broker's settings: get, or set those "
                              "that may change at runtime (until it restarts)")
    verbs = cfg.add_subparsers(dest="verb", required=True)
    get = verbs.add_parser("get", help="every setting of the brokers of a group (or one)")
    get.add_argument("target", metavar="GROUP[/ID]")
    get.add_argument("fields", nargs="*", metavar="FIELD", help="only these settings")
    set_ = verbs.add_parser("set", help="change runtime settings of the brokers of a group "
                            "(or one), until they restart")
    set_.add_argument("target", metavar="GROUP[/ID]")
    set_.add_argument("settings", nargs="+", metavar="FIELD=VALUE")
    for q in (get, set_):
        add_endpoint(q)
        add_json(q)
        q.set_defaults(func=config_cmd)


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def setup_logging(config: BrokerConfig, level: str) -> list[logging.Handler]:
    """Log to stderr and, with ``log_file``, to that file, rotated at
    ``log_max_bytes`` with ``log_backups`` kept (``logging.handlers``'
    RotatingFileHandler: ``broker.log``, ``broker.log.1``, ...)."""
    handlers: list[logging.Handler] = [logging.StreamHandler()]
    if config.log_file:
        from logging.handlers import RotatingFileHandler
        folder = os.path.dirname(os.path.abspath(config.log_file))
        try:
            os.makedirs(folder, exist_ok=True)
            handlers.append(RotatingFileHandler(config.log_file, maxBytes=config.log_max_bytes,
                                                backupCount=config.log_backups))
        except OSError as exc:
            raise ConfigError(f"log_file {config.log_file}: {exc.strerror or exc}") from None
    logging.basicConfig(level=level.upper(), format=LOG_FORMAT, handlers=handlers, force=True)
    return handlers


def run(args) -> int:
    overrides = {"zookeeper": args.zookeeper, "cluster": args.cluster, "group": args.group,
                 "broker_id": args.broker_id, "port": args.port, "listen_host": args.listen_host,
                 "data_dir": args.data_dir, "flush": args.flush, "replication": args.replication}
    overrides.update(parse_settings(BrokerConfig, args.set))
    config = BrokerConfig.load(args.config, overrides=overrides)
    setup_logging(config, args.log_level)
    from duomq.broker.server import run_broker
    run_broker(config)
    return 0


def config_cmd(args) -> int:
    """``duomq broker config get|set GROUP[/ID]``: each broker of the target
    asked in turn (all of a group: a role changes hands, its settings should
    not)."""
    from duomq.client import PullConsumer
    from duomq.client.base import raise_for
    from duomq.coordinator import zk as zkutil
    from duomq.coordinator.paths import ZkPaths
    from duomq.proto import pb
    zookeeper, cluster = endpoint(args)
    group, _, only = args.target.partition("/")
    changes: dict[str, str] = {}
    for item in getattr(args, "settings", []):
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise ConfigError(f"{item!r} is not FIELD=VALUE")
        changes[key] = value
    out: dict[str, dict[str, Any]] = {}
    with PullConsumer("duomq-admin", zookeeper=zookeeper, cluster=cluster) as c:
        members = zkutil.read_members(c.zk, ZkPaths(cluster), group)
        if only:
            members = {k: m for k, m in members.items() if str(k) == only}
        if not members:
            raise ConfigError(f"no live broker {args.target!r} in cluster {cluster!r}")
        for bid, m in sorted(members.items()):
            status, error, resp = c.remoting.call(
                m.address, pb.BROKER_CONFIG, pb.BrokerConfigRequest(set=changes), 10)
            raise_for(status, error)
            values = dict(resp.values)
            if getattr(args, "fields", None):
                unknown = sorted(set(args.fields) - set(values))
                if unknown:
                    raise ConfigError(f"no such setting: {', '.join(unknown)}")
                values = {k: values[k] for k in args.fields}
            out[f"{group}/{bid}"] = {"values": values, "changed": list(resp.changed),
                                     "runtime": list(resp.runtime)}
    if args.json:
        emit(out)
    elif args.verb == "set":
        for who, got in out.items():
            print(f"{who}: " + (", ".join(f"{k} = {got['values'][k]}" for k in got["changed"])
                                 or "nothing changed") + " (until it restarts)")
    else:
        first = next(iter(out.values()))
        names = sorted(first["values"])
        rows = [[n, *[got["values"].get(n, "") for got in out.values()],
                 "yes" if n in first["runtime"] else ""] for n in names]
        print(table(rows, ["setting", *out, "runtime"]))
    return 0
