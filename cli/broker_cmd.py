"""``duomq broker``: run one broker in the foreground."""

from __future__ import annotations

import logging
import os

from duomq.common.config import BrokerConfig, parse_settings


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


def run(args) -> int:
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    overrides = {"zookeeper": args.zookeeper, "cluster": args.cluster, "group": args.group,
                 "broker_id": args.broker_id, "port": args.port, "listen_host": args.listen_host,
                 "data_dir": args.data_dir, "flush": args.flush, "replication": args.replication}
    overrides.update(parse_settings(BrokerConfig, args.set))
    config = BrokerConfig.load(args.config, overrides=overrides)
    from duomq.broker.server import run_broker
    run_broker(config)
    return 0
