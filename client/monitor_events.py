"""What a libzmq client socket's monitor says (the client's CURVE
connections): a connection died, the broker refused this client's key, or
the broker serves another key than the one expected (a rotation)."""

from __future__ import annotations

import zmq
from zmq.utils.monitor import recv_monitor_message

from duomq.common.errors import AuthenticationError, BrokerUnreachableError

__all__ = ["MISMATCH", "WATCHED", "KeyMismatch", "_lost"]

LOST = zmq.EVENT_DISCONNECTED
REFUSED = zmq.EVENT_HANDSHAKE_FAILED_AUTH    # the broker's ZAP refused our CURVE key
# CURVE: the broker could not open our hello, sealed for the broker key we
# expected; it serves another one (a broker key rotation under way)
MISMATCH = zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
WATCHED = LOST | REFUSED


class KeyMismatch(BrokerUnreachableError):
    """The CURVE handshake failed: the socket expected another broker key."""


def _lost(monitor: zmq.Socket) -> bool:
    """Read a socket monitor's pending events: did a connection die? Raises
    AuthenticationError when the broker refused this client's key, and
    KeyMismatch when the broker does not hold the key the socket expects."""
    lost = refused = mismatch = False
    while monitor.poll(0):
        event = recv_monitor_message(monitor)["event"]
        lost |= event == LOST
        refused |= event == REFUSED
        mismatch |= event == MISMATCH
    if refused:
        raise AuthenticationError("the broker refused these credentials: the key is no "
                                  "registered user's (removed, or replaced by a new key)",
                                  at_handshake=True)
    if mismatch:
        raise KeyMismatch("the CURVE handshake failed: the broker serves a key other than "
                           "the one expected of it (a broker key rotation under way?)")
    return lost
