"""Sending on a ROUTER_MANDATORY socket with a small high-water mark."""

from __future__ import annotations

import zmq


def send_now(socket: zmq.Socket, frames: list, copy: bool = True) -> None:
    """Send without blocking; zmq.Again only when the peer's queue is really
    full. libzmq learns that its I/O thread has drained a queue from commands
    the socket reads at most about once a millisecond while it is not
    blocking, so with a small high-water mark a send can find a queue "full"
    that is empty: on Again the commands are read (ZMQ_EVENTS does) and the
    send is tried once more."""
    try:
        socket.send_multipart(frames, zmq.NOBLOCK, copy=copy)
    except zmq.Again:
        socket.getsockopt(zmq.EVENTS)
        socket.send_multipart(frames, zmq.NOBLOCK, copy=copy)
