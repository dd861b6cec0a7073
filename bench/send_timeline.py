#!/usr/bin/env python3
"""Where a one-outstanding send's time goes, hop by hop (issue 41): a
master and a slave (FLUSH, REPLICATION: SYNC_FLUSH and SYNC by default;
REPLICATION=NONE for a lone master) and a producer process (E2E=1: and a
push consumer whose pull is held for each send, the delivery's hops too), recorded
together by ``perf record`` on the kernel's syscall-exit tracepoints
(nothing in duomq is changed for it; ``perf trace`` cost ~100 us a call
here, the buffered record a few) while the producer makes N sends (default
40) GAP_MS apart (default 20), so that each send's syscalls stand alone.

Every thread is named: Python threads by ``py-spy dump`` (the broker's
serving loop, its group commit, the slave's replication thread ...),
ZeroMQ's I/O threads by their name (``ZMQbg/IO/0``). For each (process,
thread, syscall) that returns in a send's window, the median time it
returns after the send starts (its k-th return in the window: "#k");
printed as one JSON line, sorted by that
time, with the median round trip. A poll or epoll_wait that returns is a
thread waking up; ``write`` and ``read`` of 8 bytes are ZeroMQ's mailbox
(an eventfd) between a Python thread and its I/O thread; ``sendto`` and
``recvfrom`` are TCP; ``fdatasync`` is a flush. perf's own cost (a few us
per traced syscall) is in every figure: compare runs of this tool, not its
totals with the benchmarks'.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from duomq.dev.zookeeper import launch
from duomq.testing.harness import LocalCluster

FLUSH = os.environ.get("FLUSH", "SYNC_FLUSH")
REPLICATION = os.environ.get("REPLICATION", "SYNC")
N = int(os.environ.get("N", 40))
E2E = os.environ.get("E2E") == "1"
GAP_MS = float(os.environ.get("GAP_MS", 20))
SYSCALLS = ("sendto", "sendmsg", "recvfrom", "write", "read", "poll", "ppoll", "epoll_wait",
            "fdatasync", "pwrite64")
LINE = re.compile(r"^\s*(.+?)\s+(\d+) \[\d+\]\s+([\d.]+):\s+syscalls:sys_exit_(\w+): (0x[0-9a-f]+)")

PRODUCER = """
import sys, time
from duomq.client import Message, Producer
p = Producer(zookeeper=sys.argv[1], cluster=sys.argv[2])
for _ in range(300):
    p.send(Message("T", b"x" * 100))
print("ready", flush=True)
sys.stdin.readline()
gap = float(sys.argv[3]) / 1000
for _ in range(int(sys.argv[4])):
    t = time.monotonic()
    p.send(Message("T", b"x" * 100))
    time.sleep(max(0.0, gap - (time.monotonic() - t)))
print("done", flush=True)
sys.stdin.readline()
p.close()
"""


CONSUMER = """
import sys, threading
from duomq.client import PushConsumer
got = threading.Event()
c = PushConsumer("timeline", topic="T", on_message=lambda m: None, zookeeper=sys.argv[1],
                 cluster=sys.argv[2], consume_from="last", consume_threads=0)
c.start()
print("ready", flush=True)
sys.stdin.readline()
c.shutdown()
"""


def py_spy() -> str | None:
    """py-spy's path: on PATH or beside this Python."""
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return shutil.which("py-spy") or (beside if os.path.exists(beside) else None)


def thread_names(role: str, pid: int, spy: str) -> dict[int, str]:
    """tid -> "role/thread" for every thread of ``pid``."""
    names = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/comm") as f:
            names[int(tid)] = f"{role}/{f.read().strip()}"
    out = subprocess.run([spy, "dump", "-j", "--pid", str(pid)], capture_output=True, text=True,
                         timeout=60)
    for t in json.loads(out.stdout or "[]"):
        name = re.sub(r"^Thread-\d+ \((\w+)\)$", r"\1", t["thread_name"])
        names[t["os_thread_id"]] = f"{role}/{name}"
    return names


def events(script: str, names: dict[int, str]) -> list[tuple[float, str]]:
    """(the time a syscall returned, in ms, "thread syscall") from ``perf
    script``'s lines, of the calls that did something: a wait or a read
    that returned nothing is left out."""
    out = []
    for line in script.splitlines():
        m = LINE.match(line)
        if m is None:
            continue
        _comm, tid, secs, call, ret = m.groups()
        value = int(ret, 16)
        if value >= 1 << 63:
            value -= 1 << 64
        if value <= 0 and call in ("poll", "ppoll", "epoll_wait", "read", "recvfrom"):
            continue
        out.append((float(secs) * 1000, f"{names.get(int(tid), tid)} {call}"))
    return sorted(out)


def windows(evs: list[tuple[float, str]], producer: str) -> list[list[tuple[float, str]]]:
    """Each send's events: from the producer's first syscall after a quiet
    gap, for 0.8 of GAP_MS."""
    out: list[list[tuple[float, str]]] = []
    end = -1.0
    for t, what in evs:
        if t >= end and what.startswith(producer):
            out.append([])
            start, end = t, t + GAP_MS * 0.8
        if out and t < end:
            out[-1].append((round((t - start) * 1000, 1), what))
    return out


def main() -> int:
    spy = py_spy()
    if shutil.which("perf") is None or spy is None:
        print("send_timeline: needs perf (apt-get install linux-perf) and py-spy (pip install "
              "py-spy, to name the threads)", file=sys.stderr)
        return 2
    base = tempfile.mkdtemp(prefix="duomq-timeline-", dir=os.environ.get("BENCH_DIR", "/var/tmp"))
    zk = launch(os.environ.get("DUOMQ_ZOOKEEPER"), data_dir=os.path.join(base, "zk"))
    cluster = LocalCluster(zk.connect, f"Timeline{os.getpid()}", os.path.join(base, "b"))
    producer = consumer = None
    try:
        repl = "ASYNC" if REPLICATION == "NONE" else REPLICATION
        roles = {"master": cluster.add_broker("broker-a", 0, flush=FLUSH, replication=repl)}
        if REPLICATION != "NONE":
            roles["slave"] = cluster.add_broker("broker-a", 1, flush=FLUSH, replication=repl)
        cluster.create_topic("T", 1)
        if E2E:                    # a consumer whose pull is held for each send
            consumer = subprocess.Popen([sys.executable, "-c", CONSUMER, zk.connect,
                                         cluster.cluster], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
            assert consumer.stdout is not None
            if consumer.stdout.readline().strip() != "ready":
                raise RuntimeError("the consumer did not start")
        producer = subprocess.Popen([sys.executable, "-c", PRODUCER, zk.connect, cluster.cluster,
                                     str(GAP_MS), str(N)], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True)
        assert producer.stdout is not None and producer.stdin is not None
        if producer.stdout.readline().strip() != "ready":
            raise RuntimeError("the producer did not start")
        pids = {"producer": producer.pid, **{r: b.pid for r, b in roles.items()}}
        if consumer is not None:
            time.sleep(1.0)        # its pulls held, the producer's warm-up consumed
            pids["consumer"] = consumer.pid
        names: dict[int, str] = {}
        for role, pid in pids.items():
            names.update(thread_names(role, pid, spy))
        data = os.path.join(base, "perf.data")
        perf = subprocess.Popen(["perf", "record", "-q", "-o", data,
                                 "-e", ",".join(f"syscalls:sys_exit_{c}" for c in SYSCALLS),
                                 "-p", ",".join(str(p) for p in pids.values())],
                                stderr=subprocess.DEVNULL)
        time.sleep(1.0)                                 # attached
        producer.stdin.write("go\n")
        producer.stdin.flush()
        producer.stdout.readline()
        time.sleep(0.2)
        perf.send_signal(2)                             # SIGINT: perf writes its file
        perf.wait(60)
        script = subprocess.run(["perf", "script", "-i", data], capture_output=True, text=True,
                                timeout=300).stdout
        evs = events(script, names)
        sends = windows(evs, "producer/MainThread")
        firsts: dict[str, list[float]] = {}
        for w in sends:
            count: dict[str, int] = {}
            for t, what in w:                        # the k-th return of a call: hop "... #k"
                count[what] = count.get(what, 0) + 1
                key = what if count[what] == 1 else f"{what} #{count[what]}"
                firsts.setdefault(key, []).append(t)
        # the answer's arrival: the producer's sending thread waking (libzmq's
        # socket) or reading (its own, transport native) last in its window
        woke = ("producer/MainThread poll", "producer/MainThread recvfrom")
        rtts = [max(t for t, what in w if what in woke) for w in sends
                if any(what in woke for _t, what in w)]
        common = {k: v for k, v in firsts.items() if len(v) >= 0.8 * len(sends)}
        timeline = sorted(({"at_us": round(statistics.median(v), 1), "hop": k, "seen": len(v)}
                           for k, v in common.items()), key=lambda h: h["at_us"])
        # e2e: the consumer's first read in the window (its held pull answered)
        got = [min(t for t, what in w if what.startswith("consumer/") and
                   what.endswith(" recvfrom")) for w in sends
               if any(what.startswith("consumer/") and what.endswith(" recvfrom")
                      for _t, what in w)]
        print(json.dumps({"bench": "send_timeline", "flush": FLUSH, "replication": REPLICATION,
                          "sends": N, "windows": len(sends), "round_trip_p50_us":
                          round(statistics.median(rtts), 1) if rtts else None,
                          **({"delivered_p50_us": round(statistics.median(got), 1)
                              if got else None} if E2E else {}),
                          "timeline": timeline}), flush=True)
        return 0
    finally:
        for proc in (producer, consumer):
            if proc is not None and proc.poll() is None:
                proc.kill()
        cluster.stop_all()
        zk.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
