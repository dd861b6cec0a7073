"""Connecting to ZooKeeper, and JSON node data."""

from __future__ import annotations

import json
import logging
import socket

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


def four_letter(host: str, port: int, word: str = "srvr", timeout: float = 1.0) -> str:
    """A ZooKeeper four-letter command's answer (the server must whitelist it)."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(word.encode())
        chunks = []
        while True:
            data = s.recv(4096)
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks).decode(errors="replace")


def server_mode(host: str, port: int) -> str:
    """leader, follower, standalone, or "" (down, or not in a quorum)."""
    try:
        out = four_letter(host, port, "srvr")
    except OSError:
        return ""
    return next((line.split(":", 1)[1].strip() for line in out.splitlines()
                 if line.startswith("Mode:")), "")
