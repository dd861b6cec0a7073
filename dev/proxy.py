"""The dev cluster's ``duomq proxy`` (``duomq dev up --proxy``): one proxy
process beside the brokers, on a free port of 127.0.0.1, described in the
dev state as ``proxy``."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from duomq.common.errors import DuomqError
from duomq.dev.ports import free_ports
from duomq.dev.processes import alive, started_at, stop

START_WAIT_S = 30.0


def start(data_dir: str, zookeeper: str, cluster: str) -> dict:
    """Start the proxy and return once its port accepts connections."""
    port = free_ports(1)[0]
    log_path = os.path.join(data_dir, "proxy.log")
    with open(log_path, "ab") as logf:
        proc = subprocess.Popen([sys.executable, "-m", "duomq", "proxy", "--zookeeper", zookeeper,
                                 "--cluster", cluster, "--host", "127.0.0.1", "--port", str(port)],
                                stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    started = started_at(proc.pid)
    out = {"address": f"127.0.0.1:{port}", "pid": proc.pid, "started": started, "log": log_path}
    deadline = time.monotonic() + START_WAIT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise DuomqError(f"duomq proxy exited with {proc.returncode}; see {log_path}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return out
        except OSError:
            time.sleep(0.1)
    stop(proc.pid, started)
    raise DuomqError(f"duomq proxy did not listen on {out['address']} within "
                     f"{START_WAIT_S:g} s; see {log_path}")


def status(p: dict | None) -> dict | None:
    if not p:
        return None
    return {"address": p["address"], "pid": p["pid"], "alive": alive(p["pid"], p.get("started")),
            "log": p["log"]}


def down(p: dict | None) -> bool:
    return p is not None and stop(p["pid"], p.get("started"))
