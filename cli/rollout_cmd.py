"""``duomq rollout``: a role-aware rolling restart or upgrade of broker
groups on Kubernetes (``duomq.rollout``). Apply the new manifests first
(``kubectl apply -k``: the StatefulSets use ``updateStrategy: OnDelete``, so
nothing restarts then); the rollout then restarts each group's slaves, hands
the master over to an updated slave and restarts the old master, one group
at a time, and stops at the first step that does not come back healthy."""

from __future__ import annotations

import sys

from duomq.cli.common import add_json, emit
from duomq.common.errors import DuomqError
from duomq.rollout.kube import Kubectl
from duomq.rollout.plan import Unhealthy
from duomq.rollout.run import Rollout

SELECTOR = "app.kubernetes.io/name=duomq,app.kubernetes.io/component=broker"


def add(sub) -> None:
    p = sub.add_parser("rollout", help="role-aware rolling restart/upgrade of broker groups "
                                       "on Kubernetes (through kubectl)")
    p.add_argument("--namespace", "-n", help="the namespace (default: kubectl's)")
    p.add_argument("--context", help="the kubeconfig context (default: kubectl's)")
    p.add_argument("--kubectl", default="kubectl", help="the kubectl to run (kubectl)")
    p.add_argument("--selector", "-l", default=SELECTOR,
                   help=f"the broker groups' StatefulSets ({SELECTOR})")
    p.add_argument("--group", action="append", default=[],
                   help="only this StatefulSet (repeat for more; default: every one selected)")
    p.add_argument("--dry-run", action="store_true",
                   help="say what would be done, change nothing")
    p.add_argument("--timeout", type=float, default=600,
                   help="seconds each step may take to come back healthy (600)")
    add_json(p)
    p.set_defaults(func=run)


def run(args) -> int:
    kube = Kubectl(args.kubectl, args.namespace, args.context)
    say = (lambda s: print(s, file=sys.stderr, flush=True)) if args.json else \
        (lambda s: print(s, flush=True))
    rollout = Rollout(kube, timeout_s=args.timeout, say=say)
    found = sorted(kube.statefulsets(args.selector), key=lambda s: s["metadata"]["name"])
    names = [s["metadata"]["name"] for s in found]
    missing = [g for g in args.group if g not in names]
    if missing:
        raise DuomqError(f"no broker StatefulSet {', '.join(missing)} (found: "
                         f"{', '.join(names) or 'none'} with {args.selector})")
    if not found:
        raise DuomqError(f"no StatefulSet matches {args.selector}")
    reports, stopped = [], None
    for sts in found:
        if args.group and sts["metadata"]["name"] not in args.group:
            continue
        try:
            reports.append(rollout.roll(sts, dry_run=args.dry_run).as_dict())
        except Unhealthy as exc:
            stopped = str(exc)
            break
    out = {"ok": stopped is None, "dry_run": args.dry_run, "groups": reports,
           "stopped": stopped}
    if args.json:
        emit(out)
    elif stopped:
        print(f"rollout stopped: {stopped}; groups after it were not touched")
    else:
        print("rollout " + ("planned" if args.dry_run else "done") + ": " + "; ".join(
            f"{r['group']} " + ("up to date" if r["up_to_date"] else
                                f"{len(r['steps'])} steps, {r['hand_overs']} hand-over(s)")
            for r in reports))
    return 0 if stopped is None else 1
