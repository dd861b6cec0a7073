"""A drill's share-group readers (``--consumer share``): reader processes
(``share_reader``) of one share group, which the kill-consumer scenario
kills with SIGKILL and replaces; their journal of deliveries and acks, and
the wait until every stored message is accounted for."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

from duomq.drill.share_checker import Event, accounted

INVISIBLE_MS = 5000          # a killed reader's messages come back this soon


class ShareReaders:
    def __init__(self, zookeeper: str, cluster: str, topic: str, group: str, readers: int,
                 prefix: bytes = b""):
        self.args = [zookeeper, cluster, topic, group, str(INVISIBLE_MS)]
        self.group = group
        self.prefix = prefix             # this run's bodies (the topic may hold earlier runs)
        self.events: list[Event] = []
        self.lock = threading.Lock()
        self.procs: list[subprocess.Popen] = []
        self.threads: list[threading.Thread] = []   # each reads one reader's journal
        self.killed = 0
        self.held_by_killed = 0                     # messages killed readers held
        for _ in range(readers):
            self._start()

    def _start(self) -> subprocess.Popen:
        p = subprocess.Popen([sys.executable, "-m", "duomq.drill.share_reader", *self.args],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        index = len(self.procs)
        self.procs.append(p)
        t = threading.Thread(target=self._read, args=(p, index), daemon=True,
                             name=f"drill-share-reader-{index}")
        self.threads.append(t)
        t.start()
        return p

    def _read(self, p: subprocess.Popen, index: int) -> None:
        assert p.stdout is not None
        for line in p.stdout:
            try:
                e = json.loads(line)
            except ValueError:
                continue                   # a line cut by the kill
            with self.lock:
                self.events.append(Event(e["k"], e["b"].encode(), e["n"], index,
                                         e.get("m", "")))

    # ------------------------------------------------------------ faults
    def kill_one(self) -> str:
        """kill -9 the reader holding the most messages (received, no ack
        sent yet), else the oldest live one; what was done, with what it
        held counted from its whole journal once the kill closed it: those
        messages must come back to the others (its acks sent without an
        answer may have been taken)."""
        live = [i for i, p in enumerate(self.procs) if p.poll() is None]
        if not live:
            return "no live reader"
        victim = max(live, key=self._holding)
        self.procs[victim].kill()
        self.procs[victim].wait(10)
        self.threads[victim].join(10)          # its journal read to the end
        self.killed += 1
        held = self._holding(victim)
        self.held_by_killed += held
        return f"kill -9 share reader {victim} (pid {self.procs[victim].pid}, holding {held})"

    def _holding(self, reader: int) -> int:
        """Messages ``reader`` received and sent no ack for."""
        with self.lock:
            got = {(e.body, e.delivery) for e in self.events
                   if e.reader == reader and e.kind == "d" and e.body.startswith(self.prefix)}
            sent = {(e.body, e.delivery) for e in self.events
                    if e.reader == reader and e.kind in "iaru"}
        return len(got - sent)

    def start_one(self) -> str:
        p = self._start()
        return f"started share reader {len(self.procs) - 1} (pid {p.pid})"

    # ------------------------------------------------------------ views
    def journal(self) -> list[Event]:
        with self.lock:
            return list(self.events)

    def wait_accounted(self, stored: set[bytes], dead, timeout_s: float) -> bool:
        """Until every body of ``stored`` was acked (or its ack's outcome is
        unknown) or is among ``dead()`` (the group's dead-letter queue)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                done = accounted(self.events)
            left = stored - done
            if not left or not left - dead():
                return True
            time.sleep(0.5)
        return False

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
            if p.stdout is not None:
                p.stdout.close()
