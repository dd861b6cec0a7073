"""Answers to clients, with memory bounded per peer (Kafka mutes a channel
whose responses pile up; ZeroMQ counts its queues in messages, not bytes).

The client ROUTER is ``ROUTER_MANDATORY`` with a small send high-water mark
(``PIPE_MESSAGES``), so ZeroMQ holds at most that many answers for a peer that
does not read. An answer that finds its peer's pipe full waits here, in order,
and is retried on every turn of the loop. A peer whose waiting answers pass
``limit_bytes`` is *muted*: those answers are freed and its requests dropped
unread; after ``mute_s`` it is forgotten (the broker drops its held pulls) and
served again if it comes back. So a peer that never reads costs at most
``PIPE_MESSAGES`` answers plus ``limit_bytes``, and that memory is freed when
it goes. Serving thread only.
"""

from __future__ import annotations

import logging
from collections import deque

import zmq

from duomq.transport.zsend import Sent, send_now

log = logging.getLogger(__name__)

PIPE_MESSAGES = 16          # the client ROUTER's SNDHWM: answers ZeroMQ queues per peer


class Outbox:
    def __init__(self, socket: Sent, limit_bytes: int, mute_s: float):
        self.socket = socket
        self.limit_bytes = limit_bytes
        self.mute_s = mute_s
        self.waiting: dict[bytes, deque[bytes]] = {}   # peer -> answers its pipe had no room for
        self.waiting_bytes: dict[bytes, int] = {}
        self.muted: dict[bytes, float] = {}            # peer -> muted since (monotonic s)
        self.dropped_requests = 0                      # requests of muted peers, unread
        self.mutes = 0                                 # peers muted so far

    def send(self, identity: bytes, payload: bytes, now: float) -> bool:
        """Send an answer now, or queue it behind the peer's waiting ones;
        False when it was dropped (the peer is gone, or muted)."""
        queue = self.waiting.get(identity)
        if queue is None:
            try:
                send_now(self.socket, [identity, payload])
                return True
            except zmq.Again:
                if identity in self.muted:
                    return False
                queue = self.waiting[identity] = deque()
                self.waiting_bytes[identity] = 0
            except zmq.ZMQError:                       # EHOSTUNREACH: the peer is gone
                log.debug("client %s gone; answer dropped", identity.hex())
                return False
        queue.append(payload)
        self.waiting_bytes[identity] += len(payload)
        if self.waiting_bytes[identity] > self.limit_bytes:
            self._mute(identity, now)
            return False
        return True

    def _mute(self, identity: bytes, now: float) -> None:
        held = self.waiting_bytes.pop(identity, 0)
        self.waiting.pop(identity, None)
        self.muted[identity] = now
        self.mutes += 1
        log.warning("client %s does not read its answers (%d bytes waiting): muted for "
                    "%.0f s, its requests dropped", identity.hex(), held, self.mute_s)

    def flush(self) -> bool:
        """Retry waiting answers; True while some still wait."""
        for identity, queue in list(self.waiting.items()):
            while queue:
                try:
                    send_now(self.socket, [identity, queue[0]])
                except zmq.Again:
                    break
                except zmq.ZMQError:
                    queue.clear()
                    break
                self.waiting_bytes[identity] -= len(queue.popleft())
            if not queue:
                del self.waiting[identity]
                del self.waiting_bytes[identity]
        return bool(self.waiting)

    def accepts(self, identity: bytes) -> bool:
        """False for a muted peer: its request is dropped unread."""
        if self.muted and identity in self.muted:
            self.dropped_requests += 1
            return False
        return True

    def expire(self, now: float) -> list[bytes]:
        """Forget peers muted ``mute_s`` ago; returns them (the broker drops
        what else it keeps for them)."""
        gone = [i for i, since in self.muted.items() if now - since >= self.mute_s]
        for identity in gone:
            del self.muted[identity]
        return gone
