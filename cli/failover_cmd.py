"""``duomq failover GROUP [--to ID]``: a planned switchover. The master stops
taking writes, waits until an in-sync slave holds everything, and hands the
master node over; producers follow through ZooKeeper watches. Nothing acked
is lost.

``duomq failover --step-down``, a pod's ``preStop``: when the local broker
(found as ``duomq health`` finds it) is a master, it hands over to an
in-sync slave before the pod stops; a slave just leaves. All of it (the
status, ZooKeeper, the hand-over) within ``--timeout``, by default what the
pod's grace period leaves it (``common.grace``)."""

from __future__ import annotations

import time

from kazoo.exceptions import NodeExistsError, NoNodeError

from duomq.cli.common import add_endpoint, add_json, emit, endpoint
from duomq.cli.health_cmd import add_target, broker_status, local_credentials, target
from duomq.common.errors import DuomqError
from duomq.common.grace import GRACE_ENV, grace_from_env, handover_budget
from duomq.common.role import Role
from duomq.coordinator import zk as zkutil
from duomq.coordinator.nodes import MasterNode, SwitchoverNode
from duomq.coordinator.paths import ZkPaths
from duomq.coordinator.zk_login import broker_zk_login


def add(sub) -> None:
    p = sub.add_parser("failover", help="planned switchover of a broker group's master")
    p.add_argument("group", nargs="?", help="broker group (not with --step-down)")
    p.add_argument("--step-down", action="store_true",
                   help="for a pod's preStop: the local broker, if master, hands over")
    p.add_argument("--to", type=int, dest="target", help="broker id to hand over to "
                   "(default: the in-sync slave with the most data)")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds to wait (30; with --step-down, all of it, by default what "
                        f"the pod's grace period leaves, from ${GRACE_ENV})")
    add_endpoint(p)
    add_target(p)
    add_json(p)
    p.set_defaults(func=run)


def _master(zk, paths: ZkPaths, group: str) -> MasterNode | None:
    try:
        return MasterNode.from_bytes(zk.get(paths.master(group))[0])
    except NoNodeError:
        return None


def switchover(zk, cluster: str, group: str, target: int | None, timeout_s: float) -> dict:
    paths = ZkPaths(cluster)
    before = _master(zk, paths, group)
    if before is None:
        raise DuomqError(f"broker group {group!r} has no master to hand over from")
    if target is not None and target == before.broker_id:
        return {"group": group, "from": before.broker_id, "to": target, "epoch": before.epoch,
                "seconds": 0.0, "already": True}
    _check_target(zk, paths, group, before.broker_id, target)
    request = SwitchoverNode(before.broker_id, target, time.time())
    try:
        zk.create(paths.switchover(group), request.to_bytes())
    except NodeExistsError:
        raise DuomqError(f"a switchover of {group!r} is already under way") from None
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    try:
        while time.monotonic() < deadline:
            now = _master(zk, paths, group)
            if now is not None and now.broker_id != before.broker_id:
                return {"group": group, "from": before.broker_id,
                        "to": now.broker_id, "epoch": now.epoch,
                        "seconds": round(time.monotonic() - t0, 3)}
            time.sleep(0.05)
    finally:
        try:
            zk.delete(paths.switchover(group))
        except NoNodeError:
            pass
    raise DuomqError(f"switchover of {group!r} did not finish in {timeout_s:g} s (is an "
                     f"in-sync slave connected?)")


def _check_target(zk, paths: ZkPaths, group: str, master: int, target: int | None) -> None:
    """Refused before anything is written: a target that is not a live
    broker of the group (its live brokers named), or a group with no live
    slave to take over (a hand-over would wait out its whole timeout)."""
    try:
        live = sorted(int(c) for c in zk.get_children(paths.members(group)) if c.isdigit())
    except NoNodeError:
        live = []
    slaves = [b for b in live if b != master]
    if target is not None and target not in slaves:
        raise DuomqError(f"broker {target} is not a live broker of {group!r}: its live "
                         f"brokers are {', '.join(map(str, live)) or 'none'} (master "
                         f"{master})")
    if not slaves:
        raise DuomqError(f"broker group {group!r} has no live slave to hand over to (its "
                         f"master is broker {master}): nothing was changed")


STATUS_S = 5.0           # a step-down asks the broker's role for this long at most
ZK_CONNECT_S = 10.0      # and connects to ZooKeeper for this long at most
DEFAULT_TIMEOUT_S = 30.0


def step_down_timeout(args) -> float:
    """--timeout, else what the pod's grace period leaves the hand-over."""
    if args.timeout is not None:
        return args.timeout
    grace = grace_from_env()
    return DEFAULT_TIMEOUT_S if grace is None else handover_budget(grace)


def step_down(args) -> dict:
    timeout = step_down_timeout(args)
    deadline = time.monotonic() + timeout

    def left(most: float = float("inf")) -> float:
        return max(0.1, min(most, deadline - time.monotonic()))

    address, _, cfg = target(args)
    st, _ = broker_status(address, left(STATUS_S), local_credentials(cfg))
    who = f"{st.broker_group}/{st.broker_id}"
    if st.role != Role.MASTER:
        return {"group": st.broker_group, "broker": who, "role": st.role, "handed_over": False,
                "message": f"broker {who} is a slave: it leaves without a hand-over"}
    # the broker's own ZooKeeper and cluster, unless told otherwise
    zookeeper, cluster = endpoint(args) if cfg is None else \
        (args.zookeeper or cfg.zookeeper, args.cluster or cfg.cluster)
    # in a broker's pod, as the broker reaches ZooKeeper (its digest and SASL login)
    login = broker_zk_login(cfg.auth, cfg.auth_dir, cfg.zookeeper_sasl_file) \
        if cfg is not None else (zkutil.FROM_ENV, zkutil.FROM_ENV)
    connect_s = left(ZK_CONNECT_S)
    out = run_switchover(zookeeper, cluster, st.broker_group, None, lambda: left(), *login,
                         connect_s=connect_s)
    return {**out, "broker": who, "role": Role.MASTER, "handed_over": True,
            "message": f"broker {who} handed {st.broker_group} over to broker {out['to']} at "
                       f"epoch {out['epoch']} in {out['seconds']} s"}


def run_switchover(zookeeper: str, cluster: str, group: str, target_id: int | None,
                   timeout_s, access=zkutil.FROM_ENV, sasl=zkutil.FROM_ENV,
                   connect_s: float | None = None) -> dict:
    """``timeout_s``: seconds, or a function giving what is left once
    connected (a step-down's one deadline); ``connect_s``: how long to wait
    for ZooKeeper (default: the CLI's)."""
    zk = zkutil.connect(zookeeper, cluster=cluster, access=access, sasl=sasl,
                        timeout_s=connect_s)
    try:
        return switchover(zk, cluster, group, target_id,
                          timeout_s() if callable(timeout_s) else timeout_s)
    finally:
        zkutil.close(zk)


def run(args) -> int:
    if args.step_down:
        if args.group or args.target is not None:
            raise DuomqError("--step-down hands over the local broker's group: give no GROUP "
                             "or --to")
        out = step_down(args)
        if args.json:
            emit(out)
        else:
            print(out["message"])
        return 0
    if not args.group:
        raise DuomqError("give the broker GROUP to switch over, or --step-down")
    out = run_switchover(*endpoint(args), args.group, args.target,
                         DEFAULT_TIMEOUT_S if args.timeout is None else args.timeout)
    if args.json:
        emit(out)
    else:
        print(f"{out['group']}: broker {out['to']} is already the master, at epoch "
              f"{out['epoch']}: nothing to do" if out.get("already") else
              f"{out['group']}: broker {out['from']} handed over to broker {out['to']}, master "
              f"at epoch {out['epoch']}, in {out['seconds']} s")
    return 0
