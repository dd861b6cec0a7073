#!/usr/bin/env python3
"""`make demo`: a local ZooKeeper and a master broker, a topic, 100,000
messages, a consumer group of two, counts and lag 0, then everything stops.

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
    from duomq.coordinator import zk as zkutil
    from duomq.coordinator.membership import list_members
    zk = zkutil.connect(zookeeper)
    try:
        return list_members(zk, cluster, GROUP)
    finally:
        zkutil.close(zk)


def main() -> int:
    subprocess.run([sys.executable, "-m", "duomq", "dev", "down"], env=ENV,
                   capture_output=True)
    shutil.rmtree(DATA, ignore_errors=True)
    consumers = []
    try:
        state = json.loads(duomq("dev", "up", "--json", capture=True))
        print(f"  ZooKeeper {state['zookeeper']}, broker "
              f"{state['brokers'][0]['group']} at {state['brokers'][0]['address']}")
        duomq("topic", "create", TOPIC, "--queues", "8")
        for i in range(2):
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
                                    "--json", capture=True))
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
        ok = produced["statuses"] == {"SEND_OK": COUNT} and consumed >= COUNT \
            and status["total_lag"] == 0
        print("demo OK" if ok else "demo FAILED")
        return 0 if ok else 1
    finally:
        for c in consumers:
            if c.poll() is None:
                c.kill()
        duomq("dev", "down")


if __name__ == "__main__":
    sys.exit(main())
