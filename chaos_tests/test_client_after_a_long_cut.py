"""Clients come back at once when a long cut of their broker's port heals
(issue 68's campaign: a 19.6 s cut of a master's client port left its
producers silent 60 s after the heal). A connect made while the port was
cut stays in SYN_SENT, and the kernel retries its SYN 1, 3, 7, 15 and 31 s
after the dial; a client that waited on it waited out that backoff. Now a
connection not open within CONNECT_TIMEOUT_S is closed and the next request
dials again, on the blocking path (a producer's send) and on the I/O
thread's (an asynchronous send). Real parts: a lone master, its client port
cut by iptables on 127.0.0.1 for 8 s."""

import threading
import time

import pytest

from duomq.client import Message, Producer
from duomq.testing.harness import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CUT_S = 8.0


@pytest.mark.parametrize("how", ["blocking", "async"])
def test_sends_are_acked_soon_after_a_long_cut_of_the_masters_port_heals(local_cluster,
                                                                          netfilter, how):
    master = local_cluster.add_broker("broker-a", 0)
    local_cluster.create_topic("Cut", queues=1)
    acked: list[float] = []
    stop = threading.Event()
    with Producer(zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster,
                  send_timeout_ms=1500) as p:
        wait_for(lambda: p.send(Message("Cut", b"warm")).ok, 20, "a first ack")

        def send_one() -> bool:
            try:
                if how == "blocking":
                    return p.send(Message("Cut", b"x")).ok
                return p.send_async(Message("Cut", b"x")).result(5).ok
            except Exception:       # noqa: BLE001 - a send that times out in the cut
                return False

        def load() -> None:
            while not stop.is_set():
                if send_one():
                    acked.append(time.monotonic())
                else:
                    time.sleep(0.05)
        t = threading.Thread(target=load, daemon=True)
        t.start()
        wait_for(lambda: acked, 10, "sends acked before the cut")
        netfilter.cut_port(master.port)
        cut_at = time.monotonic()
        time.sleep(CUT_S)
        healing = time.monotonic()      # the rules go from here on (two iptables calls)
        netfilter.heal()
        healed = time.monotonic()
        wait_for(lambda: acked and acked[-1] > healed, 20, "an ack after the heal")
        stop.set()
        t.join(10)
    during = [a for a in acked if cut_at + 0.5 < a < healing]
    back = min(a for a in acked if a > healed) - healed
    print(f"{how}: first ack {back:.2f} s after an {CUT_S:g} s cut healed")
    assert not during, "acked while the port was cut"
    assert back < 2.5, f"the first ack came {back:.1f} s after the heal"
