"""The ``duomq`` command."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

from duomq import __version__
from duomq.common import endpoint
from duomq.common.errors import DuomqError
from duomq.format import native

# subcommand -> its module; only the one being run is imported, so that a
# pod's probes (`duomq health`, every few seconds) start fast
COMMANDS = {"dev": "dev_cmd", "broker": "broker_cmd", "topic": "topic_cmd",
            "produce": "produce_cmd", "consume": "consume_cmd", "status": "status_cmd",
            "failover": "failover_cmd", "health": "health_cmd", "message": "message_cmd",
            "dlq": "dlq_cmd", "group": "group_cmd", "drill": "drill_cmd", "top": "top_cmd",
            "auth": "auth_cmd", "tx": "tx_cmd", "rollout": "rollout_cmd",
            "cluster": "cluster_cmd", "proxy": "proxy_cmd"}


def parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or only subcommand ``only``'s part of it."""
    p = argparse.ArgumentParser(prog="duomq", description="duomq: a replicated message broker")
    p.add_argument("--version", action="version",
                   version=f"duomq {__version__} ({native.describe()})")
    sub = p.add_subparsers(dest="command", required=True)
    for name, module in COMMANDS.items():
        if only in (None, name):
            importlib.import_module(f"duomq.cli.{module}").add(sub)
    return p


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line read. A command whose last positional takes any
    number (``produce TOPIC [BODY ...]``) takes them after options too:
    argparse alone ends the positional at the first option, so ``produce T
    --quiet a b`` was refused."""
    # the first word that is not an option names the subcommand
    first = next((a for a in argv if not a.startswith("-")), None)
    p = parser(first if first in COMMANDS else None)
    args, extra = p.parse_known_args(argv)
    trailing = getattr(args, "trailing", None)
    if extra and trailing and all(not a.startswith("-") for a in extra):
        getattr(args, trailing).extend(extra)
    elif extra:
        p.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse(argv)
    if args.command != "broker":
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
        # a person waits: an unreachable ZooKeeper is one line after a few
        # seconds, not ten seconds of the library's reconnection warnings
        endpoint.connect_timeout_s = endpoint.CLI_CONNECT_TIMEOUT_S
        logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    try:
        return args.func(args)
    except DuomqError as exc:
        print(f"duomq: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # the reader went away (`duomq status | head`): as a Unix tool, say nothing
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as exc:
        # kazoo is loaded only by the commands that use ZooKeeper (not the probes)
        if "kazoo" in sys.modules:
            from kazoo.exceptions import NoAuthError
            if isinstance(exc, NoAuthError):
                print("duomq: ZooKeeper refused: this cluster is secured, and these "
                      "credentials (--credentials or $DUOMQ_CREDENTIALS) may not do that, or "
                      "there are none", file=sys.stderr)
                return 2
        raise
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
