"""Connecting to ZooKeeper, and JSON node data."""

from __future__ import annotations

import json
import logging

from kazoo.client import KazooClient
from kazoo.retry import KazooRetry

from duomq.common.errors import ServiceNotAvailableError

log = logging.getLogger(__name__)


def connect(hosts: str, *, timeout_s: float = 10.0, session_timeout_ms: int = 10_000,
            read_only: bool = False) -> KazooClient:
    """A started KazooClient (``hosts`` may carry a chroot: ``h:p,h2:p/chroot``)."""
    zk = KazooClient(
        hosts=hosts, timeout=session_timeout_ms / 1000,
        connection_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=2),
        command_retry=KazooRetry(max_tries=5, delay=0.1, backoff=2, max_delay=2),
        read_only=read_only,
    )
    try:
        zk.start(timeout=timeout_s)
    except Exception as exc:
        zk.close()
        raise ServiceNotAvailableError(
            f"cannot reach ZooKeeper at {hosts} within {timeout_s:g} s: {exc}") from None
    return zk



def dumps(data: dict) -> bytes:
    return json.dumps(data, sort_keys=True).encode()


def loads(raw: bytes | None) -> dict:
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        log.warning("ignoring a znode whose data is not JSON")
        return {}
    return value if isinstance(value, dict) else {}


def close(zk: KazooClient | None) -> None:
    if zk is None:
        return
    try:
        zk.stop()
    finally:
        zk.close()
