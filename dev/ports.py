"""Free TCP ports on loopback, for servers to listen on."""

import contextlib
import os
import random
import socket
import threading

LOW = 10_000                 # the lowest port handed out
TRIES = 64                   # picks before leaving the choice to the kernel
SLICE_ENV = "DUOMQ_PORT_SLICE"   # "i/n": this process picks from the i-th of n slices

_lock = threading.Lock()
_cursor: dict[tuple[int, int], int] = {}    # per span: the next port to try


def free_port(host: str = "127.0.0.1") -> int:
    return free_ports(1, host)[0]


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct free ports: each socket stays bound until all are
    chosen, so the same port cannot be picked twice (one broker's client,
    replication and metrics ports must differ). Picked below the kernel's
    ephemeral range where it leaves room: a port from that range, free when
    picked, could be taken as the local port of any outgoing connection
    (a ZooKeeper client's, a producer's) before the server binds it, which
    the suite's parallel workers met ("Address already in use").

    A process walks its span from a random start rather than picking at
    random, so it does not hand out a port again until it has handed out
    all the others: a port given to a broker still starting (free, not yet
    bound) is not given to the next one. Processes that pick at once (the
    suite's workers) take disjoint slices of the span (``DUOMQ_PORT_SLICE``),
    which two workers' brokers, each starting on a port the other had just
    picked, met as "Address already in use" too."""
    span = listen_span()
    with contextlib.ExitStack() as stack:
        ports: list[int] = []
        for _ in range(n):
            s = stack.enter_context(socket.socket())
            ports.append(_bind(s, host, span))
        return ports


def listen_span() -> tuple[int, int] | None:
    """``(low, high)``: this process's ports below ``ip_local_port_range``
    from LOW (its slice of them under ``DUOMQ_PORT_SLICE``); None when there
    are too few or the range cannot be read (the kernel's choice then)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            ephemeral_low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    if ephemeral_low - LOW < 1_000:
        return None
    return port_slice((LOW, ephemeral_low - 1), os.environ.get(SLICE_ENV, ""))


def port_slice(span: tuple[int, int], spec: str) -> tuple[int, int]:
    """The ``i``-th of ``n`` equal parts of ``span`` for a spec ``"i/n"``;
    the whole span for an empty or malformed spec, or parts under 100 ports."""
    try:
        i, n = (int(x) for x in spec.split("/"))
    except ValueError:
        return span
    width = (span[1] - span[0] + 1) // n if n > 0 else 0
    if not 0 <= i < n or width < 100:
        return span
    low = span[0] + i * width
    return low, low + width - 1


def _bind(s: socket.socket, host: str, span: tuple[int, int] | None) -> int:
    if span is not None:
        for _ in range(TRIES):
            try:
                s.bind((host, _next(span)))
                return s.getsockname()[1]
            except OSError:          # taken: the next one
                continue
    s.bind((host, 0))
    return s.getsockname()[1]


def _next(span: tuple[int, int]) -> int:
    low, high = span
    with _lock:
        port = _cursor.get(span)
        if port is None:
            port = random.randint(low, high)
        _cursor[span] = low if port >= high else port + 1
        return port
