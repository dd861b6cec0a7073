"""``duomq failover GROUP [--to ID]``: a planned switchover. The master stops
taking writes, waits until an in-sync slave holds everything, and hands the
master node over; producers follow through ZooKeeper watches. Nothing acked
is lost."""

from __future__ import annotations

import time

from kazoo.exceptions import NodeExistsError, NoNodeError

from duomq.cli.common import add_endpoint, add_json, emit, endpoint
from duomq.common.errors import DuomqError
from duomq.coordinator import zk as zkutil
from duomq.coordinator.paths import ZkPaths


def add(sub) -> None:
    p = sub.add_parser("failover", help="planned switchover of a broker group's master")
    p.add_argument("group", help="broker group")
    p.add_argument("--to", type=int, dest="target", help="broker id to hand over to "
                   "(default: the in-sync slave with the most data)")
    p.add_argument("--timeout", type=float, default=30, help="seconds to wait (30)")
    add_endpoint(p)
    add_json(p)
    p.set_defaults(func=run)


def switchover(zk, cluster: str, group: str, target: int | None, timeout_s: float) -> dict:
    paths = ZkPaths(cluster)
    try:
        before = zkutil.loads(zk.get(paths.master(group))[0])
    except NoNodeError:
        raise DuomqError(f"broker group {group!r} has no master to hand over from") from None
    if target is not None and target == before.get("broker_id"):
        raise DuomqError(f"broker {target} is already the master of {group!r}")
    request = {"from": before.get("broker_id"), "requested_at": time.time()}
    if target is not None:
        request["target"] = target
    try:
        zk.create(paths.switchover(group), zkutil.dumps(request))
    except NodeExistsError:
        raise DuomqError(f"a switchover of {group!r} is already under way") from None
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    try:
        while time.monotonic() < deadline:
            try:
                now = zkutil.loads(zk.get(paths.master(group))[0])
            except NoNodeError:
                now = {}
            if now.get("broker_id") not in (None, before.get("broker_id")):
                return {"group": group, "from": before.get("broker_id"),
                        "to": now["broker_id"], "epoch": now.get("epoch"),
                        "seconds": round(time.monotonic() - t0, 3)}
            time.sleep(0.05)
    finally:
        try:
            zk.delete(paths.switchover(group))
        except NoNodeError:
            pass
    raise DuomqError(f"switchover of {group!r} did not finish in {timeout_s:g} s (is an "
                     f"in-sync slave connected?)")


def run(args) -> int:
    zookeeper, cluster = endpoint(args)
    zk = zkutil.connect(zookeeper)
    try:
        out = switchover(zk, cluster, args.group, args.target, args.timeout)
    finally:
        zkutil.close(zk)
    if args.json:
        emit(out)
    else:
        print(f"{out['group']}: broker {out['to']} is master at epoch {out['epoch']} "
              f"(was {out['from']}), {out['seconds']} s")
    return 0
