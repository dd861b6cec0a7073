#!/usr/bin/env python3
"""The README's performance table in one sitting: the peers' harness for
Redis 7 Streams (``../shared/peers/run_all.sh``, its async and sync modes)
and ``bench/run_all.py`` (duomq's four modes), 100-byte bodies, alternated
ROUNDS times (default 2): the machine is noisy, so the two are compared only
within one sitting.

Prints one JSON line per round and system with its figures, then one with
each pairing's medians and ratios: duomq's ASYNC pair (ASYNC replication,
ASYNC_FLUSH) against Redis's async mode (AOF everysec + replica), its SYNC
pair (SYNC, SYNC_FLUSH) against Redis's sync mode (AOF always + WAIT 1).

PEERS_DIR points at the harness (default ../shared/peers; it installs
redis-server when missing and runs its own servers on loopback ports).
N_SYNC, N_BACKLOG and LAT_SECS reach both harnesses.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PEERS_DIR = os.environ.get("PEERS_DIR", os.path.join(HERE, "..", "..", "shared", "peers"))
ROUNDS = int(os.environ.get("ROUNDS", 2))
PAIRS = {"async": ("ASYNC_FLUSH", "ASYNC"), "sync": ("SYNC_FLUSH", "SYNC")}
# figure -> (Redis's metric, duomq's (benchmark name, field)), higher is better?
FIGURES = {
    "one_outstanding_per_s": ("produce_sync1_msgs_per_s", ("produce_sync1", "msgs_per_s"), True),
    "one_outstanding_p50_us": ("produce_sync1_ack_p50_us", ("produce_sync1", "ack_p50_us"), False),
    "batch256_per_s": ("produce_batch256_msgs_per_s", ("produce_batch256", "msgs_per_s"), True),
    "backlog_per_s": ("consume_backlog_msgs_per_s", ("consume_backlog", "msgs_per_s"), True),
    "e2e_p50_us": ("e2e_lat_p50_us@2000/s", ("e2e_latency", "p50_us"), False),
    "e2e_p99_us": ("e2e_lat_p99_us@2000/s", ("e2e_latency", "p99_us"), False),
}


def redis_round() -> dict[str, dict[str, float]]:
    """Redis's figures by mode, from the harness's TSV (peer mode bytes metric value)."""
    out = subprocess.run(["bash", os.path.join(PEERS_DIR, "run_all.sh")], check=True,
                         env={**os.environ, "PEERS": "redis", "SIZES": "100"},
                         stdout=subprocess.PIPE, text=True).stdout
    modes: dict[str, dict[str, float]] = {}
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) == 5 and parts[0] != "peer" and not line.startswith("#"):
            modes.setdefault(parts[1], {})[parts[3]] = float(parts[4])
    if not modes:
        sys.exit("beside_redis: the peer harness printed no figures")
    return modes


def duomq_round() -> dict[str, dict[str, dict]]:
    """duomq's figures by mode ("FLUSH/REPLICATION") and benchmark name."""
    out = subprocess.run([sys.executable, os.path.join(HERE, "run_all.py")], check=True,
                         env={**os.environ, "SIZES": "100"}, stdout=subprocess.PIPE,
                         text=True).stdout
    modes: dict[str, dict[str, dict]] = {}
    for line in out.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            modes.setdefault(f"{r['flush']}/{r['replication']}", {})[r["name"]] = r
    return modes


def summary(rounds: list[dict]) -> dict:
    """Per pairing and figure: both systems' medians over the rounds and
    duomq's ratio (above 1 is better for duomq, for latencies too)."""
    out = {}
    for redis_mode, (flush, replication) in PAIRS.items():
        figures = {}
        for figure, (metric, (name, field), higher) in FIGURES.items():
            ours = [r["duomq"][f"{flush}/{replication}"][name][field] for r in rounds]
            theirs = [r["redis"][redis_mode][metric] for r in rounds]
            a, b = statistics.median(ours), statistics.median(theirs)
            figures[figure] = {"duomq": a, "redis": b,
                               "ratio": round(a / b if higher else b / a, 3)}
        out[f"duomq {flush}/{replication} vs redis {redis_mode}"] = figures
    return out


def main() -> int:
    if not os.path.isfile(os.path.join(PEERS_DIR, "run_all.sh")):
        print(f"beside_redis: no peer harness at {PEERS_DIR} (set PEERS_DIR)", file=sys.stderr)
        return 2
    rounds = []
    for i in range(ROUNDS):
        r = {"redis": redis_round(), "duomq": duomq_round()}
        rounds.append(r)
        for system, modes in r.items():
            print(json.dumps({"bench": "beside_redis", "round": i + 1, "system": system,
                              "modes": modes}), flush=True)
    print(json.dumps({"bench": "beside_redis", "rounds": ROUNDS, "body_bytes": 100,
                      "pairs": summary(rounds)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
