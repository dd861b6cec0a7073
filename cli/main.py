"""The ``duomq`` command."""

from __future__ import annotations

import argparse
import logging
import sys

from duomq import __version__
from duomq.cli import (broker_cmd, consume_cmd, dev_cmd, failover_cmd, health_cmd, produce_cmd,
                       status_cmd, topic_cmd)
from duomq.common.errors import DuomqError


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="duomq", description="duomq: a replicated message broker")
    p.add_argument("--version", action="version", version=f"duomq {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for mod in (dev_cmd, broker_cmd, topic_cmd, produce_cmd, consume_cmd, status_cmd, failover_cmd,
                health_cmd):
        mod.add(sub)
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if args.command != "broker":
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args)
    except DuomqError as exc:
        print(f"duomq: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
