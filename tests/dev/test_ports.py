"""Ports for servers: distinct, free, and outside the kernel's ephemeral
range, which outgoing connections take their local ports from (a port
picked there was taken by another worker's connection before the broker
bound it: "Address already in use")."""

import socket

from duomq.dev.ports import free_ports, listen_span


def test_ports_are_distinct_free_and_below_the_ephemeral_range():
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        ephemeral_low = int(f.read().split()[0])
    span = listen_span()
    assert span is not None and span[1] == ephemeral_low - 1
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
