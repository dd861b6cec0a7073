"""How duomq's processes talk over TCP: ZeroMQ's ZMTP 3.1, spoken either by
the thread that owns the socket itself (no libzmq I/O thread between the
wire and that thread: about 35 us saved per hop on a two-core host) or by
libzmq when CURVE is on (auth is libzmq's).

- ``zmtp``: ZMTP framing (greeting, READY, frames), with its C twin
  ``_zmtp.c`` chosen once at import (``DUOMQ_NATIVE=0``: the Python reference).
- ``ports``: a port the broker's serving thread owns (the client port, the
  replication port) as one interface, ``Port``, over its two kinds, chosen
  once when it is made: ``NativePort`` (``router``: the thread's own ROUTER,
  its ``fileno`` an epoll set over its connections) and ``LibzmqPort``.
- ``dealer``: a client's and a slave's own DEALER.
- ``zsend``: sending on a libzmq ROUTER_MANDATORY socket with a small
  high-water mark, and asking whether a message waits (both ports answer it).
- ``fd_poll``: ``poll(2)`` over plain descriptors, where libzmq's poller
  would ask twice; ``busy_poll``: the adaptive spin of the serving loop and
  of a client's blocking call before it sleeps.

Nothing here knows a broker, a client or a request type: the wire below the
frame codec (``proto.codec``)."""
