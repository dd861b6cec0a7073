#!/usr/bin/env python3
"""The failover campaign (issues 18 and 39): `duomq drill run` scenario
after scenario against a fresh dev cluster per durability mode (a master and
two slaves, defaults, a 3-server ZooKeeper ensemble), each report kept under
bench/drills/, and one JSON line per (mode, scenario):

  {"mode", "scenario", "rounds", "lost", "unreadable_under_fault", "duplicated",
   "duplicated_rewrites", "rto_p50_s",
   "rto_p99_s", "rto_max_s", "longest_gap_s", "split_brain_s", "id_conflicts",
   "foreign_errors", "guarantees_held", "seed"}

CAMPAIGN="kill-master:50 pause-master:20 ..." and MODES="sync async" choose
what runs (default: the issue's campaign); NAME+mixed runs a scenario under
the mixed load (delayed and transactional producers beside the plain ones,
``duomq drill run --load mixed``); --table prints the README table from the
reports already in bench/drills/.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "drills")
DEFAULT = ("kill-master:50 kill-master+mixed:20 pause-master:20 partition-master-zookeeper:20 "
           "partition-master-slave:20 kill-zookeeper:10 zookeeper-outage:10 random:20")
SEED = {"sync": 39, "async": 3939}      # the random schedules, replayable
MODES = {"sync": ["--flush", "sync", "--replication", "sync"],
         "async": ["--flush", "async", "--replication", "async"]}


def duomq(*args, env, check=True):
    return subprocess.run([sys.executable, "-m", "duomq", *args], env=env, check=check,
                          capture_output=True, text=True)


def rto(rtos):
    done = sorted(t for t in rtos if t is not None)
    if not done:
        return None, None, None
    return (done[len(done) // 2], done[min(len(done) - 1, round(0.99 * (len(done) - 1)))],
            done[-1])


def line(mode: str, scenario: str, r: dict) -> dict:
    p50, p99, top = rto(r["rto_s"])
    return {"mode": mode, "scenario": scenario, "rounds": r["rounds"], "attempted": r["attempted"],
            "lost": r["lost"], "unreadable_under_fault": r.get("unreadable_under_fault"),
            "duplicated": r["duplicated"], "duplicated_rewrites": r.get("duplicated_rewrites"),
            "rto_p50_s": p50, "rto_p99_s": p99,
            "rto_max_s": top, "longest_gap_s": r.get("longest_gap_s"),
            "split_brain_s": r["split_brain_s"], "id_conflicts": r.get("id_conflicts"),
            "foreign_errors": r.get("foreign_errors"), "guarantees_held": r["guarantees_held"],
            "seed": r.get("notes", {}).get("seed")}


def table() -> str:
    rows = ["| mode | scenario | rounds | lost | unreadable under the fault | duplicated | "
            "RTO p50 / p99 / max (s) | longest gap (s) | split brain (s) |",
            "|---|---|---|---|---|---|---|---|---|"]
    for name in sorted(os.listdir(OUT)):
        if not name.endswith(".json"):
            continue
        scenario, _, mode = name[:-5].rpartition("-")
        with open(os.path.join(OUT, name)) as f:
            d = line(mode, scenario, json.load(f))
        rows.append(f"| {'SYNC + SYNC_FLUSH' if mode == 'sync' else 'ASYNC + ASYNC_FLUSH'} | "
                    f"{scenario} | {d['rounds']} | {d['lost']} | "
                    f"{'-' if d['unreadable_under_fault'] is None else d['unreadable_under_fault']}"
                    f" | {d['duplicated']} | "
                    f"{d['rto_p50_s']} / {d['rto_p99_s']} / {d['rto_max_s']} | "
                    f"{d['longest_gap_s']} | {d['split_brain_s']} |")
    return "\n".join(rows)


def main() -> int:
    if "--table" in sys.argv:
        print(table())
        return 0
    os.makedirs(OUT, exist_ok=True)
    plan = [item.split(":") for item in os.environ.get("CAMPAIGN", DEFAULT).split()]
    for mode in os.environ.get("MODES", "sync async").split():
        base = tempfile.mkdtemp(prefix=f"duomq-campaign-{mode}-")
        env = dict(os.environ, DUOMQ_DEV_DIR=base)
        zk = ["--zookeepers", "3"] if any(s == "kill-zookeeper" for s, _ in plan) else []
        duomq("dev", "up", "--slaves", "2", *MODES[mode], *zk, env=env)
        try:
            for scenario, rounds in plan:
                report = os.path.join(OUT, f"{scenario}-{mode}.json")
                if os.path.exists(report):     # an earlier run's report is not this run's
                    os.remove(report)
                seed = ["--seed", str(SEED[mode])] if scenario == "random" else []
                # NAME+mixed: the scenario under the mixed load (delayed and
                # transactional producers beside the plain ones)
                name, _, load = scenario.partition("+")
                loads = ["--load", load] if load else []
                p = duomq("drill", "run", "--scenario", name, "--rounds", rounds,
                          "--report", report, *seed, *loads, env=env, check=False)
                if not os.path.exists(report):
                    print(json.dumps({"mode": mode, "scenario": scenario, "error":
                                      p.stderr.strip().splitlines()[-5:]}), flush=True)
                    continue
                with open(report) as f:
                    print(json.dumps(line(mode, scenario, json.load(f))), flush=True)
        finally:
            duomq("dev", "down", env=env, check=False)
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
