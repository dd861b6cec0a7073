"""Free TCP ports on loopback."""

import contextlib
import socket


def free_port(host: str = "127.0.0.1") -> int:
    return free_ports(1, host)[0]


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct free ports: each socket stays bound until all are
    chosen, so the kernel cannot hand the same port out twice (one broker's
    client, replication and metrics ports must differ)."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(n):
            s = stack.enter_context(socket.socket())
            s.bind((host, 0))
            ports.append(s.getsockname()[1])
        return ports
