"""Where a duomq cluster is: a ZooKeeper connect string and a cluster name.
Clients take them as given, else from ``DUOMQ_ZOOKEEPER`` and
``DUOMQ_CLUSTER``, else the defaults; the CLI also asks the local dev
cluster's state file (``duomq dev up`` writes it), read here so that no
production command imports the dev cluster."""

from __future__ import annotations

import ipaddress
import json
import os

DEFAULT_ZOOKEEPER = "127.0.0.1:2181"
DEFAULT_CLUSTER = "DefaultCluster"
DEV_STATE = "state.json"
# how long a new ZooKeeper session may take to connect before the caller is
# told it cannot reach the ensemble: a broker or a client library waits
# CONNECT_TIMEOUT_S; the CLI sets CLI_CONNECT_TIMEOUT_S (a person waits)
CONNECT_TIMEOUT_S = 10.0
CLI_CONNECT_TIMEOUT_S = 2.5       # with Python's start, a command ends within 3 s
connect_timeout_s = CONNECT_TIMEOUT_S


def resolve_endpoint(zookeeper: str | None, cluster: str | None) -> tuple[str, str]:
    """Explicit values, then DUOMQ_ZOOKEEPER / DUOMQ_CLUSTER, then the defaults."""
    return (zookeeper or os.environ.get("DUOMQ_ZOOKEEPER") or DEFAULT_ZOOKEEPER,
            cluster or os.environ.get("DUOMQ_CLUSTER") or DEFAULT_CLUSTER)


def default_dev_dir() -> str:
    """The dev cluster's directory: $DUOMQ_DEV_DIR, else ~/.duomq/dev."""
    return os.environ.get("DUOMQ_DEV_DIR") or os.path.join(os.path.expanduser("~"), ".duomq", "dev")


def read_dev_state(data_dir: str) -> dict | None:
    """The dev cluster's state (its ZooKeeper, cluster and processes), or None."""
    try:
        with open(os.path.join(data_dir, DEV_STATE)) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a listen address) is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False             # a name or 0.0.0.0/*: reachable from elsewhere


def exposed_without_auth(auth: bool, listen_host: str) -> bool:
    """A broker any host may reach and use, reading and writing every topic:
    no auth, listening beyond loopback ("": an older broker, unknown)."""
    return not auth and bool(listen_host) and not is_loopback(listen_host)


EXPOSED = ("serves without auth on {where}: anyone who reaches it may read and write every "
           "topic (auth = true and `duomq auth init`: docs/concepts.md, security)")
