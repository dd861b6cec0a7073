"""Ports for servers: distinct, free, and outside the kernel's ephemeral
range, which outgoing connections take their local ports from (a port
picked there was taken by another worker's connection before the broker
bound it: "Address already in use")."""

import itertools
import os
import socket

from duomq.dev.ports import LOW, SLICE_ENV, free_ports, listen_span, port_slice


def test_ports_are_distinct_free_and_below_the_ephemeral_range():
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        ephemeral_low = int(f.read().split()[0])
    span = listen_span()
    assert span == port_slice((LOW, ephemeral_low - 1), os.environ.get(SLICE_ENV, ""))
    for _ in range(50):
        ports = free_ports(3)
        assert len(set(ports)) == 3
        assert all(span[0] <= p < ephemeral_low for p in ports), ports
        for p in ports:
            with socket.socket() as s:
                s.bind(("127.0.0.1", p))          # still free: nothing holds it


def test_a_connection_never_takes_a_picked_port():
    """Outgoing connections' local ports all fall in the ephemeral range."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(64)
        picked = set(free_ports(3))
        clients = [socket.create_connection(server.getsockname()) for _ in range(50)]
        try:
            assert not picked & {c.getsockname()[1] for c in clients}
            assert all(c.getsockname()[1] > listen_span()[1] for c in clients)
        finally:
            for c in clients:
                c.close()


def test_slices_are_disjoint_and_cover_the_span():
    span = (10_000, 32_767)
    parts = [port_slice(span, f"{i}/3") for i in range(3)]
    assert parts[0][0] == span[0] and all(a[1] + 1 == b[0] for a, b in itertools.pairwise(parts))
    assert span[1] - parts[-1][1] < 3                  # at most the remainder left over
    for bad in ("", "x", "3/3", "-1/2", "1/0", "0/1000"):
        assert port_slice(span, bad) == span, bad


def test_a_process_hands_out_no_port_twice_until_it_has_walked_its_span(monkeypatch):
    """Brokers started one after another get different ports even when the
    first has not bound its ports yet; a worker's slice is kept to."""
    monkeypatch.setenv(SLICE_ENV, "1/2")
    span = listen_span()
    assert span is not None
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        ephemeral_low = int(f.read().split()[0])
    assert span == port_slice((LOW, ephemeral_low - 1), "1/2")
    handed = [p for _ in range(300) for p in free_ports(3)]
    assert len(set(handed)) == len(handed)
    assert all(span[0] <= p <= span[1] for p in handed)
