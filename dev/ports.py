"""Free TCP ports on loopback, for servers to listen on."""

import contextlib
import random
import socket

LOW = 10_000                 # the lowest port handed out
TRIES = 64                   # random picks before leaving the choice to the kernel


def free_port(host: str = "127.0.0.1") -> int:
    return free_ports(1, host)[0]


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct free ports: each socket stays bound until all are
    chosen, so the same port cannot be picked twice (one broker's client,
    replication and metrics ports must differ). Picked below the kernel's
    ephemeral range where it leaves room: a port from that range, free when
    picked, could be taken as the local port of any outgoing connection
    (a ZooKeeper client's, a producer's) before the server binds it, which
    the suite's parallel workers met ("Address already in use")."""
    span = listen_span()
    with contextlib.ExitStack() as stack:
        ports: list[int] = []
        for _ in range(n):
            s = stack.enter_context(socket.socket())
            ports.append(_bind(s, host, span))
        return ports


def listen_span() -> tuple[int, int] | None:
    """``(low, high)``: the ports below ``ip_local_port_range`` from LOW;
    None when there are too few or the range cannot be read (the kernel's
    choice then)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            ephemeral_low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return (LOW, ephemeral_low - 1) if ephemeral_low - LOW >= 1_000 else None


def _bind(s: socket.socket, host: str, span: tuple[int, int] | None) -> int:
    if span is not None:
        for _ in range(TRIES):
            try:
                s.bind((host, random.randint(*span)))
                return s.getsockname()[1]
            except OSError:          # taken: another pick
                continue
    s.bind((host, 0))
    return s.getsockname()[1]
