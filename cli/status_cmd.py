"""``duomq status``: brokers, roles, offsets and consumer lag per queue."""

from __future__ import annotations

from kazoo.exceptions import NoNodeError

from duomq.auth.credentials import resolve_credentials
from duomq.cli.common import add_endpoint, add_json, emit, endpoint, table
from duomq.client.base import raise_for, secured
from duomq.client.remoting import RemotingClient
from duomq.common.endpoint import EXPOSED, exposed_without_auth
from duomq.common.errors import ConfigError
from duomq.common.role import Role
from duomq.coordinator import zk as zkutil
from duomq.coordinator.paths import ZkPaths
from duomq.proto import pb


def add(sub) -> None:
    p = sub.add_parser("status", help="brokers, roles, offsets and consumer lag")
    add_endpoint(p)
    add_json(p)
    p.set_defaults(func=run)


def clusters(zookeeper: str) -> list[str]:
    """The duomq clusters a ZooKeeper ensemble holds."""
    from duomq.coordinator.paths import ROOT
    zk = zkutil.connect(zookeeper)
    try:
        return sorted(zk.get_children(ROOT))
    except NoNodeError:
        return []
    finally:
        zkutil.close(zk)


def collect(zookeeper: str, cluster: str) -> dict:
    zk = zkutil.connect(zookeeper)
    paths = ZkPaths(cluster)
    try:
        credentials = secured(zk, cluster, resolve_credentials(None))
    except Exception:
        zkutil.close(zk)
        raise
    remoting = RemotingClient("duomq-status", credentials=credentials)
    brokers, lag = [], []
    try:
        try:
            groups = sorted(zk.get_children(paths.brokers))
        except NoNodeError:
            groups = []
        for g in groups:
            for i, info in zkutil.read_members(zk, paths, g).items():
                entry = {"group": g, "id": i, "role": info.role, "epoch": info.epoch,
                         "address": info.address, "flush": info.flush, "pid": info.pid}
                if exposed_without_auth(info.auth, info.listen_host):
                    entry["insecure"] = EXPOSED.format(where=f"{info.listen_host} "
                                                             f"({info.address})")
                for problem in ("replication_halted", "recovery", "cannot_write"):   # a person's
                    if getattr(info, problem):
                        entry[problem] = getattr(info, problem)
                try:
                    status, error, resp = remoting.call(info.address, pb.BROKER_STATUS,
                                                        pb.BrokerStatusRequest(), 3)
                    raise_for(status, error)        # refused (a secured cluster), or broken
                except Exception as exc:
                    entry["error"] = str(exc)
                    brokers.append(entry)
                    continue
                entry.update(min_offset=resp.min_physical_offset,
                             max_offset=resp.max_physical_offset,
                             flushed_offset=resp.flushed_offset,
                             confirmed_offset=resp.confirmed_offset,
                             messages_stored=resp.messages_stored,
                             bad_requests=resp.bad_requests, clients=resp.clients,
                             flushes=resp.flushes, read_redirects=resp.read_redirects)
                if resp.role == Role.MASTER:
                    entry.update(transactions_pending=resp.transactions_pending,
                                 transaction_checks=resp.transaction_checks,
                                 transactions_discarded=resp.transactions_discarded)
                if resp.role == Role.MASTER and info.replication == "SYNC":
                    entry.update(in_sync_replicas=resp.in_sync_replicas,
                                 sync_replicas=resp.sync_replicas,
                                 min_sync_replicas=resp.min_sync_replicas,
                                 degraded=resp.degraded, isr=list(resp.isr))
                maxes = {(q.topic, q.queue_id): q.max_offset for q in resp.queues}
                # consumer offsets live on the master; a slave's copy may be stale
                for o in (resp.group_offsets if resp.role == Role.MASTER else ()):
                    top = maxes.get((o.topic, o.queue_id), o.offset)
                    lag.append({"consumer_group": o.consumer_group, "topic": o.topic,
                                "broker_group": g, "queue": o.queue_id, "offset": o.offset,
                                "max_offset": top, "lag": max(0, top - o.offset)})
                brokers.append(entry)
        for b in brokers:   # replication lag: bytes the slave lacks against its master
            master = next((m for m in brokers if m["group"] == b["group"]
                           and m.get("role") == Role.MASTER and "max_offset" in m), None)
            if b.get("role") == Role.SLAVE and master and "max_offset" in b:
                b["lag_bytes"] = max(0, master["max_offset"] - b["max_offset"])
    finally:
        remoting.close()
        zkutil.close(zk)
    return {"zookeeper": zookeeper, "cluster": cluster, "brokers": brokers, "consumer_lag": lag,
            "total_lag": sum(x["lag"] for x in lag)}


def run(args) -> int:
    zookeeper, cluster = endpoint(args)
    st = collect(zookeeper, cluster)
    if not st["brokers"]:
        known = clusters(zookeeper)
        if cluster not in known:
            raise ConfigError(f"no cluster {cluster!r} at {zookeeper} (clusters there: "
                              f"{', '.join(known) or 'none'})")
    if args.json:
        emit(st)
        return 0
    print(f"cluster {cluster} at {zookeeper}")
    print(table([[b["group"], b["id"], b["role"], b.get("epoch"), b["address"],
                  b.get("max_offset", "-"), b.get("confirmed_offset", "-"),
                  b.get("lag_bytes", "-"), b.get("error", "")] for b in st["brokers"]],
                ["group", "id", "role", "epoch", "address", "max", "confirmed", "lag bytes",
                 "error"]))
    for b in st["brokers"]:
        if b.get("degraded"):
            print(f"{b['group']}/{b['id']}: DEGRADED: {b['in_sync_replicas']} slave(s) in sync of "
                  f"sync_replicas {b['sync_replicas']}; acking under min_sync_replicas "
                  f"{b['min_sync_replicas']} (in-sync set {b['isr']})")
        for problem in ("insecure", "replication_halted", "recovery", "cannot_write"):
            if b.get(problem):
                print(f"{b['group']}/{b['id']}: {problem.replace('_', ' ')}: {b[problem]}")
    if st["consumer_lag"]:
        print()
        print(table([[x["consumer_group"], x["topic"], x["broker_group"], x["queue"], x["offset"],
                      x["max_offset"], x["lag"]] for x in st["consumer_lag"]],
                    ["consumer group", "topic", "broker group", "queue", "offset", "max", "lag"]))
    return 0
