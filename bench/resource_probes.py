#!/usr/bin/env python3
"""Resource probes (issue 17): what a buggy or hostile peer does to a master's
memory and to other clients' latency. Each probe runs against a fresh broker
(one ASYNC master with a backlog) while a well-behaved producer sends 1 KiB
messages with one outstanding; it prints one JSON line:

  probe, rss_before_mib, rss_peak_mib, rss_after_mib (5 s after the peer
  went), p50_ms / p99_ms of the well-behaved sends before and during the
  probe, and probe-specific figures.

``python bench/resource_probes.py [probe ...]``; probes: unread_pulls,
big_frame, big_client_ids, garbage_commits, ha_peers (default: all).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import threading
import time

import psutil
import zmq

from duomq.client import Message, Producer
from duomq.dev.zookeeper import launch
from duomq.proto import codec, pb
from duomq.testing.harness import LocalCluster

BACKLOG = 20_000           # 1 KiB messages in queue 0
SETTINGS = dict(segment_size_bytes=64 << 20)


class Latency(threading.Thread):
    """A producer with one send outstanding, recording each ack's latency."""

    def __init__(self, zk: str, cluster: str):
        super().__init__(daemon=True)
        self.zk, self.cluster = zk, cluster
        self.samples: list[tuple[float, float]] = []   # (monotonic time, seconds)
        self.stop = threading.Event()
        self.errors = 0

    def run(self) -> None:
        with Producer(zookeeper=self.zk, cluster=self.cluster, send_timeout_ms=10_000) as p:
            body = b"x" * 1024
            while not self.stop.is_set():
                t0 = time.monotonic()
                try:
                    p.send(Message("Other", body))
                except Exception:
                    self.errors += 1
                    continue
                self.samples.append((t0, time.monotonic() - t0))
                time.sleep(0.002)

    def between(self, a: float, b: float) -> dict:
        lat = sorted(s for t, s in self.samples if a <= t < b)
        if not lat:
            return {"n": 0}
        return {"n": len(lat), "p50_ms": round(lat[len(lat) // 2] * 1000, 2),
                "p99_ms": round(lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000, 2)}


def rss_mib(pid: int) -> float:
    return round(psutil.Process(pid).memory_info().rss / 2**20, 1)


def anon_mib(pid: int) -> float:
    """RssAnon: the heap and buffers, not the commit-log pages the mappings touch."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def dealer(ctx, address: str) -> zmq.Socket:
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.SNDHWM, 0)
    s.setsockopt(zmq.RCVHWM, 1)
    s.setsockopt(zmq.RCVBUF, 4096)
    s.connect(address)
    return s


def request(type_: int, message) -> bytes:
    return codec.encode_request(1, type_, message)


# ------------------------------------------------------------ the probes
def unread_pulls(ctx, broker, seconds: float) -> dict:
    s = dealer(ctx, broker.address)
    req = request(pb.PULL, pb.PullRequest(consumer_group="g", topic="Backlog", queue_id=0,
                                          queue_offset=0, max_messages=1024,
                                          max_bytes=4 << 20))
    sent, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        s.send(req)
        sent += 1
        if sent % 100 == 0:
            time.sleep(0.001)
    s.close(0)
    return {"pulls_sent": sent}


def big_frame(ctx, broker, seconds: float) -> dict:
    s = dealer(ctx, broker.address)
    frame = pb.Frame(version=1, request_id=1, type=pb.SEND,
                     payload=pb.SendRequest(topic="Other", count=1,
                                            records=bytes(200 << 20)).SerializeToString())
    data = frame.SerializeToString()
    end = time.monotonic() + seconds
    sent = 0
    while time.monotonic() < end and sent < 5:
        s.send(data)
        sent += 1
        time.sleep(seconds / 5)
    s.close(0)
    return {"frames_sent": sent, "frame_mib": len(data) >> 20}


def big_client_ids(ctx, broker, seconds: float) -> dict:
    s = dealer(ctx, broker.address)
    sent = 0
    for i in range(1500):
        cid = f"{i:06d}" + "c" * (1 << 20)
        s.send(request(pb.HEARTBEAT, pb.HeartbeatRequest(client_id=cid, consumer_groups=["g"])))
        sent += 1
    time.sleep(seconds)
    s.close(0)
    return {"heartbeats_sent": sent}


def garbage_commits(ctx, broker, seconds: float) -> dict:
    s = dealer(ctx, broker.address)
    s.setsockopt(zmq.RCVHWM, 1000)
    n = 0
    for i in range(200_000):
        req = pb.CommitOffsetRequest(consumer_group=f"g{i}")
        req.offsets.add(topic=f"t{i}", queue_id=i % 1000, offset=i)
        s.send(request(pb.COMMIT_OFFSET, req))
        n += 1
        while s.poll(0):
            s.recv()
    time.sleep(min(seconds, 6.0))               # one offset persist interval
    status = dealer(ctx, broker.address)
    status.setsockopt(zmq.RCVHWM, 10)
    status.send(request(pb.BROKER_STATUS, pb.BrokerStatusRequest()))
    answer = len(status.recv()) if status.poll(10_000) else -1
    status.close(0)
    s.close(0)
    path = os.path.join(broker.data_dir, "store", "consumer_offsets.json")
    return {"commits_sent": n, "offsets_file_bytes": os.path.getsize(path)
            if os.path.exists(path) else 0, "status_answer_bytes": answer}


def ha_peers(ctx, broker, seconds: float) -> dict:
    peers = [dealer(ctx, f"tcp://127.0.0.1:{broker.ha_port}") for _ in range(3)]
    for i, p in enumerate(peers):
        r = pb.HaReport(broker_id=10 + i, max_offset=0, acked_offset=1 << 60,
                        address=f"tcp://127.0.0.1:{i}", epoch=1)
        p.send(pb.Frame(version=1, type=pb.HA_REPORT, payload=r.SerializeToString())
               .SerializeToString())
    end = time.monotonic() + seconds
    while time.monotonic() < end:           # reports now and then, never a read
        time.sleep(1.0)
        for i, p in enumerate(peers):
            r = pb.HaReport(broker_id=10 + i, max_offset=0, acked_offset=1 << 60,
                            address=f"tcp://127.0.0.1:{i}", epoch=1)
            p.send(pb.Frame(version=1, type=pb.HA_REPORT, payload=r.SerializeToString())
                   .SerializeToString())
    for p in peers:
        p.close(0)
    return {"peers": len(peers)}


# probe -> (function, seconds, backlog messages)
PROBES = {"unread_pulls": (unread_pulls, 10.0, BACKLOG), "big_frame": (big_frame, 10.0, BACKLOG),
          "big_client_ids": (big_client_ids, 5.0, BACKLOG),
          "garbage_commits": (garbage_commits, 6.0, BACKLOG),
          "ha_peers": (ha_peers, 20.0, 10 * BACKLOG)}   # a log worth re-sending: 200 MiB


def run(name: str) -> dict:
    probe, seconds, backlog = PROBES[name]
    base = tempfile.mkdtemp(prefix="duomq-probe-")
    zk = launch(data_dir=os.path.join(base, "zk"))
    cluster = LocalCluster(zk.connect, f"Probe{os.getpid()}", os.path.join(base, "brokers"))
    ctx = zmq.Context()
    try:
        broker = cluster.add_broker("broker-a", 0, **SETTINGS)
        cluster.create_topic("Backlog", 1)
        cluster.create_topic("Other", 1)
        with Producer(zookeeper=zk.connect, cluster=cluster.cluster) as p:
            body = b"b" * 1024
            for _ in range(backlog // 500):
                p.send_batch([Message("Backlog", body) for _ in range(500)])
        lat = Latency(zk.connect, cluster.cluster)
        lat.start()
        time.sleep(3.0)
        t_probe = time.monotonic()
        before, anon_before = rss_mib(broker.pid), anon_mib(broker.pid)
        peak = [before, anon_before]
        watching = threading.Event()

        def watch():
            while not watching.is_set():
                peak[0] = max(peak[0], rss_mib(broker.pid))
                peak[1] = max(peak[1], anon_mib(broker.pid))
                time.sleep(0.1)
        w = threading.Thread(target=watch, daemon=True)
        w.start()
        extra = probe(ctx, broker, seconds)
        t_end = time.monotonic()
        time.sleep(5.0)
        watching.set()
        w.join()
        after = rss_mib(broker.pid)
        lat.stop.set()
        lat.join(15)
        return {"probe": name, "rss_before_mib": before, "rss_peak_mib": peak[0],
                "rss_after_mib": after, "anon_before_mib": anon_before,
                "anon_peak_mib": peak[1], "anon_after_mib": anon_mib(broker.pid),
                "alive": broker.alive(),
                "before": lat.between(t_probe - 3.0, t_probe),
                "during": lat.between(t_probe, t_end), "send_errors": lat.errors, **extra}
    finally:
        ctx.term()
        cluster.stop_all()
        zk.stop()
        shutil.rmtree(base, ignore_errors=True)


def main(argv: list[str]) -> None:
    for name in argv or list(PROBES):
        print(json.dumps(run(name)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
