"""``duomq broker``: run one broker in the foreground."""

from __future__ import annotations

import logging
import os

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
