"""The wait on native connections and ports (transport.fd_poll.FdPoller):
zmq.Poller's answers (the registered objects, POLLIN) from one poll(2), and
a hang-up or an error counts as news to read."""

import os
import socket
import time

import zmq

from duomq.transport.fd_poll import FdPoller


class Owner:
    """Something with a fileno, as a native connection is."""

    def __init__(self, fd: int):
        self.fd = fd

    def fileno(self) -> int:
        return self.fd


def test_it_names_what_is_ready_as_registered_and_waits_for_the_timeout():
    wake = os.eventfd(0, os.EFD_NONBLOCK)
    a, b = socket.socketpair()
    try:
        owner = Owner(b.fileno())
        p = FdPoller()
        p.register(owner, zmq.POLLIN)
        p.register(wake, zmq.POLLIN)
        t0 = time.monotonic()
        assert p.poll(50) == []
        assert time.monotonic() - t0 >= 0.04
        os.eventfd_write(wake, 1)
        assert p.poll(1000) == [(wake, zmq.POLLIN)]
        os.eventfd_read(wake)
        a.send(b"x")
        assert p.poll(1000) == [(owner, zmq.POLLIN)]
        b.recv(1)
        a.close()                                      # a hang-up is news too
        assert p.poll(1000) == [(owner, zmq.POLLIN)]
    finally:
        a.close()
        b.close()
        os.close(wake)
