#!/usr/bin/env python3
"""Where a one-outstanding send's microseconds go. One JSON line with, for
100-byte requests on this host (Python at both ends, separate processes):

  tcp_echo     a blocking TCP socket echo: the least a request and its answer
               cost (two wake-ups, one per process)
  zmq_echo     the same through ZeroMQ DEALER -> ROUTER, polled as the broker
               and the client poll: each message also crosses each side's
               ZeroMQ I/O thread (six wake-ups per round trip)
  duomq_send   Producer.send to a lone ASYNC_FLUSH master, one outstanding;
               with the broker's own time per SEND (its duomq_request_seconds
               histogram: the handler, from decoded request to answer)

Each figure: round trips per second and the p50/p99 in microseconds.
N sets the round trips (default 20,000; BENCH_QUICK=1: 5,000).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import socket
import time
import urllib.request

import zmq
from one_broker import one_broker

from duomq.client import Message, Producer

QUICK = os.environ.get("BENCH_QUICK") == "1"
N = int(os.environ.get("N", 5000 if QUICK else 20000))
BODY = b"x" * 100


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


def tcp_echo() -> dict:
    q: multiprocessing.Queue = multiprocessing.Queue()
    server = multiprocessing.Process(target=tcp_server, args=(q,), daemon=True)
    server.start()
    c = socket.create_connection(("127.0.0.1", q.get(timeout=10)))
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rtts = []
    for _ in range(N):
        t = time.perf_counter_ns()
        c.sendall(BODY)
        c.recv(65536)
        rtts.append(time.perf_counter_ns() - t)
    c.close()
    server.join(5)
    return figures(rtts)


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


def zmq_echo() -> dict:
    q: multiprocessing.Queue = multiprocessing.Queue()
    server = multiprocessing.Process(target=zmq_server, args=(q,), daemon=True)
    server.start()
    ctx = zmq.Context()
    dealer = ctx.socket(zmq.DEALER)
    dealer.connect(f"tcp://127.0.0.1:{q.get(timeout=10)}")
    poller = zmq.Poller()
    poller.register(dealer, zmq.POLLIN)
    rtts = []
    for _ in range(N):
        t = time.perf_counter_ns()
        dealer.send(BODY)
        poller.poll(5000)
        dealer.recv()
        rtts.append(time.perf_counter_ns() - t)
    dealer.send(b"")
    server.join(5)
    dealer.close(linger=0)
    ctx.term()
    return figures(rtts)


def send_seconds(metrics_url: str) -> tuple[float, float]:
    """(sum, count) of the broker's SEND handler histogram."""
    text = urllib.request.urlopen(metrics_url, timeout=10).read().decode()
    got = {}
    for kind in ("sum", "count"):
        m = re.search(rf'^duomq_request_seconds_{kind}\{{[^}}]*type="SEND"[^}}]*\}} (\S+)$', text,
                      re.M)
        got[kind] = float(m.group(1)) if m else 0.0
    return got["sum"], got["count"]


def duomq_send() -> dict:
    with one_broker("LatencyFloor", "Floor", 4, flush="ASYNC_FLUSH") as (zk, cluster):
        with Producer(zk, cluster) as p:
            for _ in range(200):                       # routes, sockets, page cache warm
                p.send(Message("Floor", BODY))
            url = _metrics_url(zk, cluster)
            s0, c0 = send_seconds(url)
            rtts = []
            for _ in range(N):
                t = time.perf_counter_ns()
                p.send(Message("Floor", BODY))
                rtts.append(time.perf_counter_ns() - t)
            s1, c1 = send_seconds(url)
    out = figures(rtts)
    out["broker_handler_mean_us"] = round((s1 - s0) / max(c1 - c0, 1) * 1e6, 1)
    return out


def _metrics_url(zk: str, cluster: str) -> str:
    """The broker's metrics address, from its member node."""
    from duomq.coordinator import zk as zkutil
    from duomq.coordinator.paths import ZkPaths
    client = zkutil.connect(zk, cluster=cluster)
    try:
        paths = ZkPaths(cluster)
        group = paths.members("broker-a")
        node = zkutil.loads(client.get(f"{group}/{client.get_children(group)[0]}")[0])
    finally:
        zkutil.close(client)
    return node["metrics"]


def main() -> None:
    out = {"bench": "latency_floor", "body_bytes": len(BODY), "round_trips": N,
           "tcp_echo": tcp_echo(), "zmq_echo": zmq_echo(), "duomq_send": duomq_send()}
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
