#!/usr/bin/env python3
"""Where a one-outstanding send's microseconds go. One JSON line with, for
100-byte requests on this host (Python at both ends, separate processes):

  tcp_echo     a blocking TCP socket echo: the least a request and its answer
               cost (two wake-ups, one per process)
  zmq_echo     the same through ZeroMQ DEALER -> ROUTER, polled as the broker
               and the client poll: each message also crosses each side's
               ZeroMQ I/O thread (six wake-ups per round trip)
  zmtp_client  the same ROUTER, its client speaking ZMTP 3.1 itself over a
               plain socket (no ZeroMQ, so no I/O thread, on the client's
               side: four wake-ups): what a client without ZeroMQ would save
  duomq_send   Producer.send to a lone ASYNC_FLUSH master, one outstanding;
               with the broker's own time per SEND (its duomq_request_seconds
               histogram: the handler, from decoded request to answer)
  duomq_send_no_busy_poll   the same with busy_poll_us = 0: the serving
               loop sleeps in poll at once after each turn
  duomq_send_zeromq         the same (busy poll on) with libzmq's sockets on
               both sides (client_transport and transport = "zeromq")
  send_to_echo_p50          duomq_send's median over zmq_echo's
  tcp_relay_e2e  end to end at RELAY_RATE messages a second (2,000) through
               a relay process, plain TCP at every hop: a producer process
               sends a timestamp and waits for its ack, the relay hands it
               to a consumer whose read waits there, the consumer (this
               process) notes the delay and reads again. The floor of
               e2e_latency for a server like Redis (one thread, epoll)
  zmq_relay_e2e  the same with ZeroMQ at every hop (DEALERs to a ROUTER,
               polled as the broker and the clients poll): the floor of
               duomq's e2e_latency over libzmq, with no storing, no decoding,
               no hand-off to a consume thread
  zmtp_relay_e2e the same with duomq's own ZMTP sockets at every hop (the
               relay on transport.router, the clients on
               transport.dealer): the floor of duomq's e2e_latency now

Each echo and send figure: round trips per second and the p50/p99 in
microseconds; each relay figure: the p50/p99 of RELAY_SECS (5; quick: 2)
seconds of messages. N sets the round trips (default 20,000; BENCH_QUICK=1: 5,000).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import socket
import struct
import time
import urllib.request

import zmq
from one_broker import one_broker

from duomq.client import Message, Producer

QUICK = os.environ.get("BENCH_QUICK") == "1"
N = int(os.environ.get("N", 5000 if QUICK else 20000))
BODY = b"x" * 100
RELAY_RATE = 2000
RELAY_SECS = float(os.environ.get("RELAY_SECS", 2 if QUICK else 5))
STAMP = struct.Struct("<cq")         # relay messages: b"S" + a timestamp (send), b"P" (read)


def figures(rtts_ns: list[int]) -> dict:
    rtts = sorted(rtts_ns)
    return {"per_s": round(len(rtts) / (sum(rtts) / 1e9)),
            "p50_us": round(rtts[len(rtts) // 2] / 1000, 1),
            "p99_us": round(rtts[int(len(rtts) * 0.99)] / 1000, 1)}


def tcp_server(port_q) -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    port_q.put(s.getsockname()[1])
    c, _ = s.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while data := c.recv(65536):
        c.sendall(data)


def serve(target) -> tuple[multiprocessing.Process, int]:
    """``target(port_q)`` in a process of its own; the process and the port it bound."""
    q: multiprocessing.Queue = multiprocessing.Queue()
    server = multiprocessing.Process(target=target, args=(q,), daemon=True)
    server.start()
    return server, q.get(timeout=10)


def timed(round_trip) -> dict:
    """``figures`` of N calls of ``round_trip``."""
    rtts = []
    for _ in range(N):
        t = time.perf_counter_ns()
        round_trip()
        rtts.append(time.perf_counter_ns() - t)
    return figures(rtts)


def tcp_echo() -> dict:
    server, port = serve(tcp_server)
    c = socket.create_connection(("127.0.0.1", port))
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def round_trip() -> None:
        c.sendall(BODY)
        c.recv(65536)
    out = timed(round_trip)
    c.close()
    server.join(5)
    return out


def zmq_server(port_q) -> None:
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    port_q.put(router.bind_to_random_port("tcp://127.0.0.1"))
    poller = zmq.Poller()
    poller.register(router, zmq.POLLIN)
    while True:
        poller.poll(1000)
        while True:
            try:
                parts = router.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            if parts[1] == b"":
                return
            router.send_multipart(parts)


def dealer_to(ctx: zmq.Context, port: int) -> tuple[zmq.Socket, zmq.Poller]:
    """A DEALER connected to the ROUTER on ``port``, and a poller over it."""
    dealer = ctx.socket(zmq.DEALER)
    dealer.connect(f"tcp://127.0.0.1:{port}")
    poller = zmq.Poller()
    poller.register(dealer, zmq.POLLIN)
    return dealer, poller


def zmq_echo() -> dict:
    server, port = serve(zmq_server)
    ctx = zmq.Context()
    dealer, poller = dealer_to(ctx, port)

    def round_trip() -> None:
        dealer.send(BODY)
        poller.poll(5000)
        dealer.recv()
    out = timed(round_trip)
    dealer.send(b"")
    server.join(5)
    dealer.close(linger=0)
    ctx.term()
    return out


class ZmtpDealer:
    """The least of a ZMTP 3.1 DEALER (NULL mechanism, single-frame
    messages) over a blocking socket, to time a client without ZeroMQ's I/O
    thread against a real ROUTER. Measurement only."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        greeting = b"\xff" + bytes(8) + b"\x7f\x03\x01NULL" + bytes(16) + b"\x00" + bytes(31)
        body = b"\x05READY\x0bSocket-Type" + struct.pack(">I", 6) + b"DEALER"
        self.sock.sendall(greeting + bytes([0x04, len(body)]) + body)
        peer = self._take(64)
        if peer[0] != 0xFF or peer[10] != 3:
            raise RuntimeError(f"not a ZMTP 3 peer: {peer[:11]!r}")
        flags, body = self._frame()
        if not flags & 4 or b"ROUTER" not in body:
            raise RuntimeError(f"expected the ROUTER's READY, got {body[:40]!r}")

    def _take(self, n: int) -> bytes:
        while len(self.buf) < n:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("the ROUTER closed the connection")
            self.buf += data
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def _frame(self) -> tuple[int, bytes]:
        flags = self._take(1)[0]
        size = struct.unpack(">Q", self._take(8))[0] if flags & 2 else self._take(1)[0]
        return flags, self._take(size)

    def send(self, data: bytes) -> None:
        head = bytes([0, len(data)]) if len(data) < 256 else b"\x02" + struct.pack(">Q", len(data))
        self.sock.sendall(head + data)

    def recv(self) -> bytes:
        while True:
            flags, body = self._frame()
            if not flags & 4:                  # a message; commands (PING) are skipped
                return body

    def close(self) -> None:
        self.sock.close()


def zmtp_client() -> dict:
    server, port = serve(zmq_server)
    dealer = ZmtpDealer(port)

    def round_trip() -> None:
        dealer.send(BODY)
        if dealer.recv() != BODY:
            raise RuntimeError("the echo differs")
    out = timed(round_trip)
    dealer.send(b"")
    server.join(5)
    dealer.close()
    return out


def send_seconds(metrics_url: str) -> tuple[float, float]:
    """(sum, count) of the broker's SEND handler histogram."""
    text = urllib.request.urlopen(metrics_url, timeout=10).read().decode()
    got = {}
    for kind in ("sum", "count"):
        m = re.search(rf'^duomq_request_seconds_{kind}\{{[^}}]*type="SEND"[^}}]*\}} (\S+)$', text,
                      re.M)
        got[kind] = float(m.group(1)) if m else 0.0
    return got["sum"], got["count"]


def duomq_send(busy_poll_us: int = 100, transport: str = "auto") -> dict:
    with one_broker("LatencyFloor", "Floor", 4, flush="ASYNC_FLUSH", busy_poll_us=busy_poll_us,
                    client_transport=transport) as (zk, cluster):
        with Producer(zookeeper=zk, cluster=cluster, transport=transport) as p:
            for _ in range(200):                       # routes, sockets, page cache warm
                p.send(Message("Floor", BODY))
            url = _metrics_url(zk, cluster)
            s0, c0 = send_seconds(url)
            out = timed(lambda: p.send(Message("Floor", BODY)))
            s1, c1 = send_seconds(url)
    out["broker_handler_mean_us"] = round((s1 - s0) / max(c1 - c0, 1) * 1e6, 1)
    return out


def _metrics_url(zk: str, cluster: str) -> str:
    """The broker's metrics address, from its member node."""
    from duomq.coordinator import zk as zkutil
    from duomq.coordinator.paths import ZkPaths
    client = zkutil.connect(zk, cluster=cluster)
    try:
        (member, *_) = zkutil.read_members(client, ZkPaths(cluster), "broker-a").values()
    finally:
        zkutil.close(client)
    return member.metrics


def paced(send_and_wait) -> None:
    """RELAY_RATE calls a second for RELAY_SECS, each given a CLOCK_MONOTONIC
    timestamp (ns; the same clock in every process)."""
    t0 = time.perf_counter()
    for i in range(int(RELAY_RATE * RELAY_SECS)):
        due = t0 + i / RELAY_RATE
        now = time.perf_counter()
        if due > now:
            time.sleep(due - now)
        send_and_wait(time.monotonic_ns())


def relay_figures(delays_ns: list[int]) -> dict:
    d = sorted(delays_ns[len(delays_ns) // 10:])        # the first tenth: warm-up
    return {"messages": len(d), "p50_us": round(d[len(d) // 2] / 1000, 1),
            "p99_us": round(d[int(len(d) * 0.99)] / 1000, 1)}


def tcp_relay_server(port_q) -> None:
    """Plain TCP, one thread, epoll (as Redis): acks each send after handing
    it to the waiting reader."""
    import selectors
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    port_q.put(s.getsockname()[1])
    sel = selectors.EpollSelector()
    conns = []
    for _ in range(2):
        c, _ = s.accept()
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sel.register(c, selectors.EVENT_READ)
        conns.append(c)
    reader, backlog, bufs = None, [], {c: b"" for c in conns}
    while True:
        for key, _ in sel.select():
            c = key.fileobj
            data = c.recv(65536)
            if not data:
                return
            bufs[c] += data
            while len(bufs[c]) >= STAMP.size:
                msg, bufs[c] = bufs[c][:STAMP.size], bufs[c][STAMP.size:]
                if msg[:1] == b"P":
                    reader = c
                else:
                    backlog.append(msg)
                if reader is not None and backlog:
                    reader.sendall(backlog.pop(0))
                    reader = None
                if msg[:1] == b"S":
                    c.sendall(msg)                     # the ack


def tcp_relay_producer(port: int) -> None:
    c = socket.create_connection(("127.0.0.1", port))
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send_and_wait(ts: int) -> None:
        c.sendall(STAMP.pack(b"S", ts))
        recv_exactly(c, STAMP.size)
    paced(send_and_wait)
    c.close()


def recv_exactly(c: socket.socket, n: int) -> bytes:
    got = b""
    while len(got) < n:
        got += c.recv(n - len(got))
    return got


def start_producer(target, port: int) -> multiprocessing.Process:
    producer = multiprocessing.Process(target=target, args=(port,), daemon=True)
    producer.start()
    return producer


def read_relayed(recv, send) -> list[int]:
    """The reader's side of a relay, its first "P" sent: each message's
    delay from its timestamp, and the next "P"."""
    delays = []
    for _ in range(int(RELAY_RATE * RELAY_SECS)):
        got = recv()
        delays.append(time.monotonic_ns() - STAMP.unpack(got)[1])
        send(STAMP.pack(b"P", 0))
    return delays


def tcp_relay() -> dict:
    server, port = serve(tcp_relay_server)
    reader = socket.create_connection(("127.0.0.1", port))
    reader.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    reader.sendall(STAMP.pack(b"P", 0))
    time.sleep(0.1)                          # the reader first: its connection is accepted first
    producer = start_producer(tcp_relay_producer, port)
    delays = read_relayed(lambda: recv_exactly(reader, STAMP.size), reader.sendall)
    producer.join(10)
    reader.close()
    server.join(5)
    return relay_figures(delays)


def zmq_relay_server(port_q) -> None:
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    port_q.put(router.bind_to_random_port("tcp://127.0.0.1"))
    relay(router, lambda: False)


def zmtp_relay_server(port_q) -> None:
    """The relay on duomq's own client port (transport.router): the
    serving thread reads and writes the sockets itself."""
    from duomq.transport.router import ZmtpRouter
    router = ZmtpRouter(64, 16)
    port_q.put(router.bind("127.0.0.1", 0))
    relay(router, router.backlogged)


def relay(router, backlogged) -> None:
    """Hand each "S" to the reader whose "P" waits, and ack it."""
    poller = zmq.Poller()
    poller.register(router.fileno() if hasattr(router, "backlogged") else router, zmq.POLLIN)
    reader, backlog = None, []
    while True:
        if not backlogged():
            poller.poll(1000)
        while router.get(zmq.EVENTS) & zmq.POLLIN:
            who, msg = router.recv_multipart(zmq.NOBLOCK)
            if msg == b"":
                return
            if msg[:1] == b"P":
                reader = who
            else:
                backlog.append(msg)
            if reader is not None and backlog:
                router.send_multipart([reader, backlog.pop(0)])
                reader = None
            if msg[:1] == b"S":
                router.send_multipart([who, msg])       # the ack


def zmq_relay_producer(port: int) -> None:
    ctx = zmq.Context()
    dealer, poller = dealer_to(ctx, port)

    def send_and_wait(ts: int) -> None:
        dealer.send(STAMP.pack(b"S", ts))
        poller.poll(5000)
        dealer.recv()
    paced(send_and_wait)
    dealer.close(linger=0)
    ctx.term()


def zmq_relay() -> dict:
    server, port = serve(zmq_relay_server)
    ctx = zmq.Context()
    reader, poller = dealer_to(ctx, port)
    reader.send(STAMP.pack(b"P", 0))
    producer = start_producer(zmq_relay_producer, port)

    def recv() -> bytes:
        poller.poll(5000)
        return reader.recv()
    delays = read_relayed(recv, reader.send)
    producer.join(10)
    reader.send(b"")
    server.join(5)
    reader.close(linger=0)
    ctx.term()
    return relay_figures(delays)


class NativeClient:
    """duomq's client socket (transport.dealer) with a blocking receive."""

    def __init__(self, port: int):
        from duomq.transport.dealer import ZmtpDealer
        self.d = ZmtpDealer(f"tcp://127.0.0.1:{port}")
        if not self.d.wait_open(5):
            raise RuntimeError(self.d.why)

    def send(self, data: bytes) -> None:
        self.d.send(data)

    def recv(self) -> bytes:
        while True:
            try:
                return self.d.recv()
            except zmq.Again:
                self.d.ep.poll(5)


def zmtp_relay_producer(port: int) -> None:
    c = NativeClient(port)

    def send_and_wait(ts: int) -> None:
        c.send(STAMP.pack(b"S", ts))
        c.recv()
    paced(send_and_wait)


def zmtp_relay() -> dict:
    """The relay with duomq's own ZMTP sockets at every hop: the floor of
    e2e_latency with native transports on both sides."""
    server, port = serve(zmtp_relay_server)
    reader = NativeClient(port)
    reader.send(STAMP.pack(b"P", 0))
    time.sleep(0.1)
    producer = start_producer(zmtp_relay_producer, port)
    delays = read_relayed(reader.recv, reader.send)
    producer.join(10)
    reader.send(b"")
    server.join(5)
    return relay_figures(delays)


def main() -> None:
    out = {"bench": "latency_floor", "body_bytes": len(BODY), "round_trips": N,
           "tcp_echo": tcp_echo(), "zmq_echo": zmq_echo(), "zmtp_client": zmtp_client(),
           "duomq_send": duomq_send(), "duomq_send_no_busy_poll": duomq_send(busy_poll_us=0),
           "duomq_send_zeromq": duomq_send(transport="zeromq")}
    out["send_to_echo_p50"] = round(out["duomq_send"]["p50_us"] / out["zmq_echo"]["p50_us"], 2)
    out["tcp_relay_e2e"] = tcp_relay()
    out["zmq_relay_e2e"] = zmq_relay()
    out["zmtp_relay_e2e"] = zmtp_relay()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
