"""``drill.resets`` on real sockets of this host: ``ss -K`` destroys the
established connections of one port and no other, and its peer reads a
reset."""

import os
import socket

import pytest

from duomq.drill.resets import Resetter, reset_now

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="destroying sockets needs root")


def _pair(server: socket.socket) -> tuple[socket.socket, socket.socket]:
    client = socket.create_connection(server.getsockname())
    accepted, _ = server.accept()
    return client, accepted


def test_a_reset_destroys_the_ports_connections_only():
    target, other = socket.create_server(("127.0.0.1", 0)), socket.create_server(("127.0.0.1", 0))
    with target, other:
        (c1, a1), (c2, a2) = _pair(target), _pair(other)
        with c1, a1, c2, a2:
            assert reset_now(target.getsockname()[1]) == 1
            c1.settimeout(2)
            with pytest.raises(ConnectionResetError):
                c1.sendall(b"x")
                c1.recv(1)
            c2.sendall(b"still here")
            assert a2.recv(10) == b"still here"
            assert reset_now(target.getsockname()[1]) == 0     # nothing left to reset


def test_a_resetter_resets_again_until_stopped():
    server = socket.create_server(("127.0.0.1", 0))
    with server:
        r = Resetter(server.getsockname()[1], every_s=0.05)
        held = [_pair(server)]
        assert r.start() == 1
        for _ in range(3):                      # each re-dial is reset at the next turn
            held.append(_pair(server))
            c, _a = held[-1]
            c.settimeout(2)
            with pytest.raises(ConnectionResetError):
                c.recv(1)
        said = r.stop()
        assert r.connections == 4 and "4 connection(s) destroyed" in said, said
        for c, a in held:
            c.close()
            a.close()
