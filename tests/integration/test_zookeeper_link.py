"""A ZooKeeper connection that stops answering is closed although requests
keep flowing (coordinator/zk.py, DeadLinkHandler): kazoo alone pings only
when no request was sent for half its read timeout, so a master renewing its
lease every 0.3 s stayed "connected" to a partitioned ZooKeeper for 107 s.
The answers are dropped with iptables on 127.0.0.1 (as root), the requests
still flow; the rule is removed after."""

import os
import threading
import time

import psutil
from kazoo.client import KazooState

from duomq.coordinator import zk as zkutil
from duomq.drill.netfilter import zookeeper_ports
from duomq.testing.harness import wait_for


def zookeeper_connections(port: int) -> set[int]:
    return {c.laddr.port for c in psutil.Process(os.getpid()).net_connections("tcp")
            if c.raddr and c.raddr.port == port}


def test_a_connection_whose_answers_stop_is_closed_and_the_session_resumes(zk_hosts, netfilter):
    port = zookeeper_ports(zk_hosts)[0]
    before = zookeeper_connections(port)
    zk = zkutil.connect(zk_hosts, session_timeout_ms=6000)    # a dead link after 2 s
    states: list[tuple[float, KazooState]] = []
    zk.add_listener(lambda s: states.append((time.monotonic(), s)))
    session = zk.client_id[0]
    stop = threading.Event()

    def busy():                          # a request every 0.2 s, as the lease loop does
        while not stop.is_set():
            zk.exists_async("/")
            time.sleep(0.2)

    worker = threading.Thread(target=busy, daemon=True)
    worker.start()
    try:
        (local,) = zookeeper_connections(port) - before
        netfilter.drop("INPUT", "-p", "tcp", "--sport", str(port), "--dport", str(local))
        t0 = time.monotonic()
        wait_for(lambda: any(s == KazooState.SUSPENDED for _, s in states), 8,
                 "the unanswered connection to be closed")
        closed = next(t for t, s in states if s == KazooState.SUSPENDED) - t0
        wait_for(lambda: zk.state == KazooState.CONNECTED and zk.client_id[0] == session
                 and local not in zookeeper_connections(port), 8,
                 "the same session on a new connection")
    finally:
        stop.set()
        worker.join(5)
        zkutil.close(zk)
    print(f"closed after {closed:.2f} s of unanswered requests")
    assert closed < 4.0
