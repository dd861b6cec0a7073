"""The local dev cluster behind ``duomq dev up|status|down``: a ZooKeeper and
broker processes running in the background, described by ``state.json`` in
the data dir so that ``status`` and ``down`` find them again."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

from duomq.auth.credentials import init_cluster_keys
from duomq.common.endpoint import DEFAULT_CLUSTER, DEV_STATE, read_dev_state
from duomq.common.errors import ConfigError, DuomqError
from duomq.coordinator import zk as zkutil
from duomq.coordinator.paths import ZkPaths
from duomq.dev import proxy as dev_proxy
from duomq.dev import volumes
from duomq.dev.brokers import (
    cached_bytes,
    drop_page_cache,
    read_master,
    wait_registered,
    wait_takeover,
)
from duomq.dev.ports import free_ports
from duomq.dev.processes import alive, send_signal, started_at, stop
from duomq.dev.zookeeper import launch, server_mode, start_ensemble, start_server


def _write_state(data_dir: str, state: dict) -> None:
    tmp = os.path.join(data_dir, DEV_STATE + ".tmp")
    with open(tmp, "w") as f:
        json.dump(state, f, indent=2)
    os.replace(tmp, os.path.join(data_dir, DEV_STATE))


def broker_group_name(i: int) -> str:
    return "broker-" + (chr(ord("a") + i) if i < 26 else str(i))


def start_broker(data_dir: str, zookeeper: str, cluster: str, group: str, broker_id: int,
                 settings: dict, store_size: int | None = None) -> dict:
    """Start one broker process in the background; return its description.
    With ``store_size``, its store is a volume of its own (``volumes.mount``)."""
    bdir = os.path.join(data_dir, f"{group}-{broker_id}")
    os.makedirs(bdir, exist_ok=True)
    volume = volumes.mount(bdir, store_size) if store_size else None
    spare = free_ports(3)            # distinct: the broker refuses two settings on one port
    port = settings.get("port") or spare[0]
    conf = {"cluster": cluster, "group": group, "broker_id": broker_id, "zookeeper": zookeeper,
            "port": port, "ha_port": spare[1], "metrics_port": spare[2],
            "data_dir": os.path.join(bdir, "store"),
            **{k: v for k, v in settings.items() if k not in ("port", "ha_port")}}
    cfg_path = os.path.join(bdir, "broker.toml")
    with open(cfg_path, "w") as f:
        for k, v in conf.items():
            f.write(f"{k} = {json.dumps(v)}\n")
    log_path = os.path.join(bdir, "broker.log")
    with open(log_path, "ab") as logf:
        proc = subprocess.Popen([sys.executable, "-m", "duomq", "broker", "--config", cfg_path],
                                stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    out = {"group": group, "id": broker_id, "address": f"tcp://127.0.0.1:{port}", "pid": proc.pid,
           "started": started_at(proc.pid), "config": cfg_path, "log": log_path}
    if volume:
        out["volume"] = volume
    return out


def wait_all_registered(zookeeper: str, cluster: str, brokers: list[dict],
                        timeout_s: float = 30) -> None:
    for b in brokers:
        try:
            wait_registered(zookeeper, cluster, b["group"], b["id"], b["pid"],
                            lambda b=b: alive(b["pid"], b.get("started")), b["log"], timeout_s)
        except (RuntimeError, TimeoutError) as exc:
            raise DuomqError(str(exc)) from None


def up(data_dir: str, *, groups: int = 1, slaves: int = 0, flush: str = "async",
       replication: str = "async", zookeeper: str | None = None,
       cluster: str = DEFAULT_CLUSTER, settings: dict | None = None,
       zookeepers: int = 1, store_size: int | None = None, auth: bool = False,
       proxy: bool = False) -> dict:
    if slaves < 0:
        raise ConfigError("--slaves: must be >= 0")
    if zookeepers not in (1, 3, 5):
        raise ConfigError("--zookeepers: 1, 3 or 5 servers")
    if zookeepers > 1 and zookeeper:
        raise ConfigError("--zookeepers starts an ensemble of its own: not with --zookeeper")
    if groups < 1:
        raise ConfigError("--groups: at least one broker group")
    state = read_dev_state(data_dir)
    if state and (alive(state.get("zookeeper_pid"), state.get("zookeeper_started"))
                  or any(alive(s["pid"], s.get("started"))
                         for s in state.get("zookeeper_servers", []))
                  or any(alive(b["pid"], b.get("started")) for b in state["brokers"])):
        raise ConfigError(f"a dev cluster already runs from {data_dir}; run 'duomq dev down' first")
    os.makedirs(data_dir, exist_ok=True)
    keys, credentials = None, None
    if auth:        # a secured cluster: its keys in the data dir, the admin's for the CLI;
        # a ZooKeeper of its own speaks only TLS (an ensemble or another's: as it is)
        keys = os.path.join(os.path.abspath(data_dir), "auth")
        shutil.rmtree(keys, ignore_errors=True)
        own_zk = zookeepers == 1 and not zookeeper
        credentials = {"admin": init_cluster_keys(keys, zookeeper_tls=own_zk)}
        os.environ["DUOMQ_CREDENTIALS"] = credentials["admin"]   # our own ZK reads
    if zookeepers > 1:
        servers = start_ensemble(zookeepers, os.path.join(data_dir, "zookeeper"))
        state = {"zookeeper": ",".join(f"127.0.0.1:{s['port']}" for s in servers),
                 "zookeeper_kind": "ensemble", "zookeeper_servers": servers,
                 "cluster": cluster, "data_dir": os.path.abspath(data_dir), "brokers": []}
    else:
        zk = launch(zookeeper, data_dir=os.path.join(data_dir, "zookeeper"), detach=True,
                    tls_dir=keys if auth and not zookeeper else None)
        state = {"zookeeper": zk.connect, "zookeeper_kind": zk.kind, "zookeeper_pid": zk.pid,
                 "zookeeper_started": zk.started, "zookeeper_log": zk.log_path,
                 "cluster": cluster, "data_dir": os.path.abspath(data_dir), "brokers": []}
    base = {"flush": "SYNC_FLUSH" if flush.lower().startswith("sync") else "ASYNC_FLUSH",
            "replication": replication.upper(), **(settings or {})}
    if auth:
        state["credentials"] = credentials
        base.update(auth=True, auth_dir=keys)
    _write_state(data_dir, state)
    if store_size:
        base = volumes.scaled_settings(store_size, base)
    try:
        # broker 0 of each group takes the master, and only then do the rest
        # start, to follow it (started together, a slave on a loaded host
        # could claim the group first)
        for ids in ([0], range(1, slaves + 1)):
            started = []
            for i in range(groups):
                for broker_id in ids:
                    started.append(start_broker(data_dir, state["zookeeper"], cluster,
                                                broker_group_name(i), broker_id, base,
                                                store_size))
                    state["brokers"].append(started[-1])
                    state["brokers"].sort(key=lambda b: (b["group"], b["id"]))
                    _write_state(data_dir, state)
            wait_all_registered(state["zookeeper"], cluster, started)
        if proxy:
            state["proxy"] = dev_proxy.start(data_dir, state["zookeeper"], cluster)
            _write_state(data_dir, state)
    except BaseException:
        down(data_dir)
        raise
    return status(data_dir)


def status(data_dir: str) -> dict:
    state = read_dev_state(data_dir)
    if state is None:
        return {"running": False, "data_dir": os.path.abspath(data_dir), "brokers": []}
    out = {"running": True, "zookeeper": state["zookeeper"], "cluster": state["cluster"],
           "data_dir": state["data_dir"], "zookeeper_pid": state.get("zookeeper_pid"),
           "zookeeper_alive": alive(state.get("zookeeper_pid"), state.get("zookeeper_started"))
           if state.get("zookeeper_pid")
           else None, "brokers": []}
    if state.get("proxy"):
        out["proxy"] = dev_proxy.status(state["proxy"])
    if state.get("credentials"):
        out["credentials"] = state["credentials"]
        os.environ.setdefault("DUOMQ_CREDENTIALS", state["credentials"]["admin"])
    servers = state.get("zookeeper_servers", [])
    if servers:                         # an ensemble: each server, and whether all run
        out["zookeeper_servers"] = [{"id": s["id"], "pid": s["pid"], "port": s["port"],
                                     "alive": alive(s["pid"], s.get("started")),
                                     "mode": server_mode(s)} for s in servers]
        out["zookeeper_alive"] = all(s["alive"] for s in out["zookeeper_servers"])
    roles = {}
    try:
        zk = zkutil.connect(state["zookeeper"], timeout_s=3)
        try:
            paths = ZkPaths(state["cluster"])
            for b in state["brokers"]:
                member = zkutil.read_member(zk, paths, b["group"], b["id"])
                if member is not None:
                    roles[(b["group"], b["id"])] = member
        finally:
            zkutil.close(zk)
    except DuomqError:
        out["zookeeper_alive"] = False
    for b in state["brokers"]:
        info = roles.get((b["group"], b["id"]))
        out["brokers"].append({"group": b["group"], "id": b["id"], "address": b["address"],
                               "pid": b["pid"], "alive": alive(b["pid"], b.get("started")),
                               "role": info.role if info else "DOWN",
                               "epoch": info.epoch if info else None,
                               "metrics": (info.metrics or None) if info else None,
                               "log": b["log"], **_volume_status(b)})
    return out


def _volume_status(b: dict) -> dict:
    """A broker's store volume: size and free bytes (nothing without one)."""
    vol = b.get("volume")
    if not vol:
        return {}
    out = {"volume": vol["mount"], "volume_bytes": vol["size"]}
    if os.path.ismount(vol["mount"]):
        st = os.statvfs(vol["mount"])
        out["volume_free_bytes"] = st.f_bfree * st.f_frsize
    return out


def down(data_dir: str) -> dict:
    state = read_dev_state(data_dir)
    if state is None:
        return {"stopped": []}
    stopped = ["proxy"] if dev_proxy.down(state.get("proxy")) else []
    for b in state["brokers"]:
        if stop(b["pid"], b.get("started"), timeout_s=20):
            stopped.append(f"{b['group']}/{b['id']}")
    if stop(state.get("zookeeper_pid"), state.get("zookeeper_started")):
        stopped.append("zookeeper")
    for s in state.get("zookeeper_servers", []):
        if stop(s["pid"], s.get("started")):
            stopped.append(f"zookeeper {s['id']}")
    for b in state["brokers"]:
        try:
            if b.get("volume") and volumes.unmount(b["volume"]):
                stopped.append(f"volume {b['group']}/{b['id']}")
        except ConfigError as exc:       # busy: say so, and go on stopping the rest
            stopped.append(f"volume {b['group']}/{b['id']} still mounted ({exc})")
    os.unlink(os.path.join(data_dir, DEV_STATE))
    return {"stopped": stopped}


def find_broker(state: dict, name: str) -> dict:
    """``group/id`` (or ``group`` for its broker 0) in the dev state."""
    group, _, bid = name.partition("/")
    for b in state["brokers"]:
        if b["group"] == group and b["id"] == int(bid or 0):
            return b
    raise ConfigError(f"no broker {name!r} in the dev cluster (have: "
                      + ", ".join(f"{b['group']}/{b['id']}" for b in state["brokers"]) + ")")


def kill_broker(data_dir: str, name: str, sig: int = 9, wait_takeover_s: float = 0) -> dict:
    """kill -9 (or another signal) one dev broker: for failover drills. With
    ``wait_takeover_s``, a master killed while another broker of its group
    lives is waited for until one of them is master (``new_master``,
    ``epoch``, ``took_s``; ``new_master`` None when none took over)."""
    state = read_dev_state(data_dir)
    if state is None:
        raise ConfigError(f"no dev cluster in {data_dir}")
    b = find_broker(state, name)
    others = [o for o in state["brokers"] if o["group"] == b["group"] and o["id"] != b["id"]
              and alive(o["pid"], o.get("started"))]
    before = read_master(state["zookeeper"], state["cluster"], b["group"]) \
        if wait_takeover_s and others and sig == 9 else None
    t0 = time.monotonic()
    if send_signal(b["pid"], sig, b.get("started")):
        deadline = time.monotonic() + 10
        while sig == 9 and alive(b["pid"], b.get("started")) and time.monotonic() < deadline:
            time.sleep(0.02)
    out = {"broker": f"{b['group']}/{b['id']}", "pid": b["pid"], "signal": sig}
    if before is not None and before.broker_id == b["id"]:
        now = wait_takeover(state["zookeeper"], state["cluster"], b["group"], before,
                            wait_takeover_s)
        out.update(new_master=f"{b['group']}/{now.broker_id}" if now else None,
                   epoch=now.epoch if now else before.epoch,
                   took_s=round(time.monotonic() - t0, 2))
    return out


def start_again(data_dir: str, name: str) -> dict:
    """Start a stopped dev broker again with its config and store."""
    state = read_dev_state(data_dir)
    if state is None:
        raise ConfigError(f"no dev cluster in {data_dir}")
    b = find_broker(state, name)
    if alive(b["pid"], b.get("started")):
        raise ConfigError(f"broker {name} is running (pid {b['pid']})")
    with open(b["log"], "ab") as logf:
        proc = subprocess.Popen([sys.executable, "-m", "duomq", "broker", "--config", b["config"]],
                                stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    b["pid"], b["started"] = proc.pid, started_at(proc.pid)
    _write_state(data_dir, state)
    wait_all_registered(state["zookeeper"], state["cluster"], [b])
    return {"broker": f"{b['group']}/{b['id']}", "pid": proc.pid}


def kill_zookeeper(data_dir: str, which: str = "leader") -> dict:
    """kill -9 one server of the dev ensemble (``leader``, ``follower`` or its id)."""
    state = read_dev_state(data_dir)
    servers = (state or {}).get("zookeeper_servers", [])
    if len(servers) < 3:
        raise ConfigError("the dev cluster runs one ZooKeeper server: start it with "
                          "'duomq dev up --zookeepers 3' to kill one")
    live = [s for s in servers if alive(s["pid"], s.get("started"))]
    pick = [s for s in live if (str(s["id"]) == which or server_mode(s) == which)]
    if not pick:
        raise ConfigError(f"no live ZooKeeper server is {which!r}")
    s = pick[0]
    mode = server_mode(s)
    send_signal(s["pid"], 9, s.get("started"))
    deadline = time.monotonic() + 10
    while alive(s["pid"], s.get("started")) and time.monotonic() < deadline:
        time.sleep(0.02)
    return {"zookeeper": s["id"], "pid": s["pid"], "mode": mode}


def zookeeper_pids(state: dict | None) -> list[tuple[int, float | None]]:
    """(pid, start time) of every ZooKeeper server the dev cluster started
    on this host (none: an external, shared or container ZooKeeper)."""
    state = state or {}
    servers = state.get("zookeeper_servers") or []
    if servers:
        return [(s["pid"], s.get("started")) for s in servers]
    if state.get("zookeeper_pid"):
        return [(state["zookeeper_pid"], state.get("zookeeper_started"))]
    return []


def signal_zookeepers(data_dir: str, sig: int) -> int:
    """Send ``sig`` to every ZooKeeper server of the dev cluster (SIGSTOP
    and SIGCONT: the drill's outage); how many there are."""
    pids = zookeeper_pids(read_dev_state(data_dir))
    if not pids:
        raise ConfigError("the dev cluster's ZooKeeper is not a process of this host (an "
                          "external or container ZooKeeper)")
    for pid, started in pids:
        send_signal(pid, sig, started)
    return len(pids)


def start_zookeeper(data_dir: str, server_id: int) -> dict:
    """Start a killed server of the dev ensemble again."""
    state = read_dev_state(data_dir)
    servers = (state or {}).get("zookeeper_servers", [])
    s = next((x for x in servers if x["id"] == server_id), None)
    if s is None:
        raise ConfigError(f"no ZooKeeper server {server_id} in the dev cluster")
    if alive(s["pid"], s.get("started")):
        raise ConfigError(f"ZooKeeper server {server_id} is running (pid {s['pid']})")
    s["pid"], s["started"] = start_server(s)
    _write_state(data_dir, state)       # type: ignore[arg-type]
    deadline = time.monotonic() + 30
    while not server_mode(s) and time.monotonic() < deadline:
        time.sleep(0.1)
    return {"zookeeper": server_id, "pid": s["pid"], "mode": server_mode(s)}


def drop_cache(data_dir: str, name: str) -> dict:
    """Write back and drop one broker's commit log from the page cache
    (posix_fadvise DONTNEED), making its backlog cold: for read-redirect drills.
    Pages the broker process has mapped stay resident: ``cached_mib`` says how
    much of the log is still in the page cache after the drop."""
    state = read_dev_state(data_dir)
    if state is None:
        raise ConfigError(f"no dev cluster in {data_dir}")
    b = find_broker(state, name)
    directory = os.path.join(os.path.dirname(b["config"]), "store", "commitlog")
    n = drop_page_cache(directory)
    return {"broker": f"{b['group']}/{b['id']}", "segments": n,
            "cached_mib": round(cached_bytes(directory) / (1 << 20), 1)}
