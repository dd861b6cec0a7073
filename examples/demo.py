#!/usr/bin/env python3
"""`make demo`: a local ZooKeeper, a master and its slave, a topic, 100,000
messages, a consumer group of two, counts and lag 0; then a failover (kill -9
the master: the slave takes over, the group goes on), the old master
rejoining as a slave, a planned switchback, and a catch-up reader redirected
to the slave because the master's backlog is cold. Last, the Spark pipeline
of ``examples/pipeline`` (shop events, a streaming job pinned to the slave
aggregating per minute into Parquet, a daily batch job by timestamp), its
results printed beside what was produced. Then everything stops.

Every step is the `duomq` command a user would type; each is printed first.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(os.path.dirname(HERE), ".demo")
TOPIC, GROUP, COUNT = "DemoTopic", "demo-group", 100_000
ENV = {**os.environ, "DUOMQ_DEV_DIR": DATA}
for var in ("DUOMQ_ZOOKEEPER", "DUOMQ_CLUSTER"):
    ENV.pop(var, None)


def show(args):
    print("$ duomq " + " ".join(args), flush=True)


def duomq(*args, capture=False):
    show(args)
    out = subprocess.run([sys.executable, "-m", "duomq", *args], env=ENV, check=True,
                         text=True, stdout=subprocess.PIPE if capture else None)
    return out.stdout


def group_members(zookeeper, cluster):
    from duomq.client.cluster.membership import list_members
    from duomq.coordinator import zk as zkutil
    zk = zkutil.connect(zookeeper)
    try:
        return list_members(zk, cluster, GROUP)
    finally:
        zkutil.close(zk)


def roles() -> dict:
    st = json.loads(subprocess.run([sys.executable, "-m", "duomq", "status", "--json"], env=ENV,
                                   capture_output=True, text=True, check=True).stdout)
    return {f"{b['group']}/{b['id']}": (b["role"], b.get("epoch"), b.get("lag_bytes"))
            for b in st["brokers"]}


def wait_role(broker: str, role: str, timeout_s: float = 30) -> float:
    t0 = time.monotonic()
    while roles().get(broker, ("",))[0] != role:
        if time.monotonic() - t0 > timeout_s:
            raise RuntimeError(f"{broker} did not become {role}")
        time.sleep(0.1)
    return time.monotonic() - t0


def ha_tour(state) -> bool:
    print("\n--- failover: kill -9 the master under a live consumer group")
    duomq("dev", "kill", "broker-a/0")
    took = wait_role("broker-a/1", "MASTER")
    print(f"  broker-a/1 is master {took:.1f} s after the kill (session timeout + election)")
    more = json.loads(duomq("produce", TOPIC, "--count", "10000", "--size", "100", "--json",
                            "--quiet", capture=True))
    after = json.loads(duomq("consume", TOPIC, "--group", GROUP, "--until-idle", "3", "--json",
                             "--quiet", capture=True).strip().splitlines()[-1])
    print(f"  produced {more['sent']} more ({more['statuses']}); the group consumed "
          f"{after['consumed']} from the new master")
    print("\n--- the old master returns: it rejoins as a slave of epoch 2 and catches up")
    duomq("dev", "start", "broker-a/0")
    duomq("status")
    print("\n--- planned switchback, then a catch-up reader on a cold backlog")
    duomq("failover", "broker-a", "--to", "0")
    took = wait_caught_up("broker-a/1")
    print(f"  broker-a/1 follows broker-a/0 and holds every byte ({took:.1f} s)")
    dropped = json.loads(duomq("dev", "drop-cache", "broker-a/0", "--json", capture=True))
    print(f"  broker-a/0's commit log dropped from the page cache: {dropped['cached_mib']} MiB "
          f"of it still cached (what the broker process has mapped)")
    reader = json.loads(duomq("consume", TOPIC, "--group", "catch-up", "--from", "first",
                              "--until-idle", "3", "--json", "--quiet",
                              capture=True).strip().splitlines()[-1])
    pulls = reader["pulls_by_broker"]
    print(f"  the catch-up reader consumed {reader['consumed']} messages; pulls by broker: "
          f"{pulls}. The master sent pulls of its cold (not cached) backlog to the slave and "
          f"served what was still in its page cache itself")
    final = json.loads(duomq("status", "--json", capture=True))
    print(f"  consumer lag of every group: {final['total_lag']}")
    return checked({
        "10,000 more sends after the failover all SEND_OK": more["statuses"] == {"SEND_OK": 10000},
        "the group consumed them from the new master": after["consumed"] >= 10000,
        f"the catch-up reader consumed all {COUNT + 10000}": reader["consumed"] >= COUNT + 10000,
        "the catch-up reader was sent to the slave for the cold backlog":
            pulls.get("broker-a/1", 0) > 0,
        "no consumer lag is left": final["total_lag"] == 0})


def wait_caught_up(broker: str, timeout_s: float = 30) -> float:
    """Until ``broker`` is a slave holding every byte of its master."""
    t0 = time.monotonic()
    while True:
        role, _epoch, lag = roles().get(broker, ("", None, None))
        if role == "SLAVE" and lag == 0:
            return time.monotonic() - t0
        if time.monotonic() - t0 > timeout_s:
            raise RuntimeError(f"{broker} did not catch up with its master in {timeout_s} s "
                               f"(role {role}, lag {lag} bytes)")
        time.sleep(0.1)


def checked(checks: dict[str, bool]) -> bool:
    """Every check passed; each one that did not is printed, so a failed demo
    says why."""
    for what, ok in checks.items():
        if not ok:
            print(f"  FAILED: {what}")
    return all(checks.values())


def spark_pipeline(state) -> bool:
    print("\n--- the Spark pipeline: shop events, per-minute aggregates streamed from the "
          "slave into Parquet, a daily batch report")
    duomq("topic", "create", "ShopEvents", "--queues", "8")
    args = ["-m", "pipeline.run", "--zookeeper", state["zookeeper"], "--cluster",
            state["cluster"], "--topic", "ShopEvents", "--workdir", os.path.join(DATA, "pipeline")]
    print("$ cd examples && python " + " ".join(args), flush=True)
    t0 = time.monotonic()
    run = subprocess.run([sys.executable, *args], cwd=HERE, env=ENV, text=True,
                         stderr=subprocess.PIPE, check=False)
    if run.returncode:
        print(run.stderr[-4000:])           # Spark's own log, only when something failed
    final = json.loads(duomq("status", "--json", capture=True))
    lag = sum(q["lag"] for q in final["consumer_lag"]
              if q["consumer_group"] == "minute-aggregator")
    print(f"  the pipeline took {time.monotonic() - t0:.0f} s (Spark start-up included); "
          f"lag of its consumer group minute-aggregator: {lag}")
    return checked({"the pipeline finished (exit 0)": run.returncode == 0,
                    "the pipeline's consumer group has no lag": lag == 0})


def main() -> int:
    subprocess.run([sys.executable, "-m", "duomq", "dev", "down"], env=ENV, check=False,
                   capture_output=True)
    shutil.rmtree(DATA, ignore_errors=True)
    consumers = []
    try:
        state = json.loads(duomq("dev", "up", "--slaves", "1", "--json", capture=True))
        print(f"  ZooKeeper {state['zookeeper']}; "
              + ", ".join(f"{b['group']}/{b['id']} {b['role']} at {b['address']}"
                          for b in state["brokers"]))
        duomq("topic", "create", TOPIC, "--queues", "8")
        for _ in range(2):
            args = ["consume", TOPIC, "--group", GROUP, "--from", "first", "--until-idle", "4",
                    "--json", "--quiet"]
            show(args)
            consumers.append(subprocess.Popen([sys.executable, "-m", "duomq", *args], env=ENV,
                                              stdout=subprocess.PIPE, text=True))
        deadline = time.monotonic() + 30
        while len(group_members(state["zookeeper"], state["cluster"])) < 2:
            if time.monotonic() > deadline:
                raise RuntimeError("the two consumers did not join the group")
            time.sleep(0.1)
        print("  both consumers joined the group; queues are split 4/4")
        produced = json.loads(duomq("produce", TOPIC, "--count", str(COUNT), "--size", "100",
                                    "--json", "--quiet", capture=True))
        print(f"  produced {produced['sent']} messages ({produced['statuses']}) "
              f"at {produced['msgs_per_s']:.0f} msg/s")
        summaries = []
        for c in consumers:
            out, _ = c.communicate(timeout=120)
            summaries.append(json.loads(out.strip().splitlines()[-1]))
        consumed = sum(s["consumed"] for s in summaries)
        for i, s in enumerate(summaries, 1):
            print(f"  consumer {i} consumed {s['consumed']} messages")
        status = json.loads(duomq("status", "--json", capture=True))
        duomq("status")
        print()
        print(f"produced {produced['sent']}, consumed {consumed} by a group of two, "
              f"lag {status['total_lag']}")
        ok = checked({f"all {COUNT} sends SEND_OK": produced["statuses"] == {"SEND_OK": COUNT},
                      f"the group of two consumed all {COUNT}": consumed >= COUNT,
                      "no consumer lag is left": status["total_lag"] == 0})
        ok = ha_tour(state) and ok
        ok = spark_pipeline(state) and ok
        print("demo OK" if ok else "demo FAILED")
        return 0 if ok else 1
    finally:
        for c in consumers:
            if c.poll() is None:
                c.kill()
        duomq("dev", "down")


if __name__ == "__main__":
    sys.exit(main())
