"""Connection resets: every established TCP connection to a port destroyed
(``ss -K``: the kernel closes the socket and sends its peer an RST), now
and again every ``every_s`` until stopped. Not a partition: each re-dial
gets through, and is reset at the next turn, so the peers meet the reset
in the middle of whatever they were doing (a SYNC send waiting on its
slave's ack, a transfer half written). ``netns``: the argv prefix that
enters another network namespace (a container's), empty for this host's."""

from __future__ import annotations

import subprocess
import threading

from duomq.drill.netfilter import NetfilterError

RESET_EVERY_S = 0.5


def reset_now(port: int, netns: list[str] | None = None) -> int:
    """Destroy every established connection whose local port is ``port``;
    how many. A kernel without socket destruction is a NetfilterError."""
    p = subprocess.run([*(netns or []), "ss", "-K", "-H", "-t", "state", "established",
                        "(", "sport", "=", f":{port}", ")"], capture_output=True, text=True)
    if p.returncode != 0 or "not supported" in p.stderr.lower():
        raise NetfilterError(f"cannot reset connections to port {port} (ss -K: "
                         f"{(p.stderr or p.stdout).strip() or p.returncode}): this kernel "
                         f"must destroy sockets (CONFIG_INET_DIAG_DESTROY) and the drill run "
                         f"as root")
    return sum(1 for line in p.stdout.splitlines() if line.strip())


class Resetter:
    """Resets a port's connections every ``every_s`` on a thread of its own."""

    def __init__(self, port: int, netns: list[str] | None = None,
                 every_s: float = RESET_EVERY_S):
        self.port, self.netns, self.every_s = port, netns or [], every_s
        self.resets = self.connections = 0
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> int:
        """The first reset, here (its errors raised); then the thread. How
        many connections the first one destroyed."""
        n = reset_now(self.port, self.netns)
        self.resets, self.connections = 1, n
        self._thread = threading.Thread(target=self._run, name=f"reset-{self.port}",
                                        daemon=True)
        self._thread.start()
        return n

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.connections += reset_now(self.port, self.netns)
                self.resets += 1
            except NetfilterError as exc:            # a container restarted meanwhile: said at stop
                self.error = str(exc)

    def stop(self) -> str:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        said = f"stopped resetting port {self.port}: {self.resets} reset(s), " \
               f"{self.connections} connection(s) destroyed"
        return said + (f" (last error: {self.error})" if self.error else "")


def stop_all(resetters: list[Resetter]) -> str:
    """Stop every resetter of ``resetters`` (emptied): what each did."""
    said = [r.stop() for r in resetters]
    resetters.clear()
    return "; ".join(said) or "no resets running"
