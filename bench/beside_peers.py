#!/usr/bin/env python3
"""The README's performance table in one sitting: the peers' harness
(``../shared/peers/run_all.sh``: Redis 7 Streams in its async and sync
modes, NATS JetStream R3) and ``bench/run_all.py`` (duomq's four modes,
SYNC replication with ASYNC_FLUSH, and SYNC_FLUSH + SYNC with a slave that
does not sync), 100-byte bodies, ROUNDS rounds (default
2) alternated (peers first in odd rounds, duomq first in even ones): the
machine is noisy, so systems are compared only within one sitting.

Prints one JSON line per round and system with its figures, then one with
each pairing's medians and ratios (above 1 is better for duomq, latencies
included). duomq's consumers handle each message on the thread that reads
it, as the peers' do (``consume_threads = 0``); the _pool figures are the
push consumer's default, a pool of 20 consume threads:

  duomq ASYNC_FLUSH/ASYNC  vs  redis async  (AOF everysec + replica)
  duomq SYNC_FLUSH/SYNC    vs  redis sync   (AOF always + WAIT 1; duomq's
                                             slave syncs too: stronger)
  duomq SYNC_FLUSH/SYNC/ASYNC_FLUSH  vs  redis sync  (the same durability:
                                             the master syncs each send, the
                                             slave acks once it holds it)
  duomq ASYNC_FLUSH/SYNC   vs  nats r3      (a quorum of three has it in
                                             memory; no fsync per message)

PEERS (default "redis nats") picks the peers; PEERS_DIR points at the
harness (default ../shared/peers; it installs what it lacks and runs its own
servers on loopback ports). N_SYNC, N_BACKLOG and LAT_SECS reach both
harnesses; MODES, duomq's (default the six above).
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
PEERS = os.environ.get("PEERS", "redis nats").split()
MODES = os.environ.get("MODES", "ASYNC_FLUSH/NONE SYNC_FLUSH/NONE ASYNC_FLUSH/ASYNC "
                                "SYNC_FLUSH/SYNC SYNC_FLUSH/SYNC/ASYNC_FLUSH ASYNC_FLUSH/SYNC")
# (peer, its mode, duomq's mode (FLUSH/REPLICATION[/SLAVE_FLUSH]) set against it)
PAIRS = [("redis", "async", "ASYNC_FLUSH/ASYNC"), ("redis", "sync", "SYNC_FLUSH/SYNC"),
         ("redis", "sync", "SYNC_FLUSH/SYNC/ASYNC_FLUSH"), ("nats", "r3", "ASYNC_FLUSH/SYNC")]
PEER_MODES = {"redis": ("REDIS_MODES", "async sync"), "nats": ("NATS_MODES", "r3")}
# figure -> (the peers' metric, duomq's (benchmark name, field)), higher is better?
FIGURES = {
    "one_outstanding_per_s": ("produce_sync1_msgs_per_s", ("produce_sync1", "msgs_per_s"), True),
    "one_outstanding_p50_us": ("produce_sync1_ack_p50_us", ("produce_sync1", "ack_p50_us"), False),
    "batch256_per_s": ("produce_batch256_msgs_per_s", ("produce_batch256", "msgs_per_s"), True),
    "backlog_per_s": ("consume_backlog_msgs_per_s", ("consume_backlog", "msgs_per_s"), True),
    "e2e_p50_us": ("e2e_lat_p50_us@2000/s", ("e2e_latency", "p50_us"), False),
    "e2e_p99_us": ("e2e_lat_p99_us@2000/s", ("e2e_latency", "p99_us"), False),
    # the push consumer's default (a pool of consume threads) against the same peer figures
    "backlog_pool_per_s": ("consume_backlog_msgs_per_s", ("consume_backlog_pool", "msgs_per_s"),
                           True),
    "e2e_pool_p50_us": ("e2e_lat_p50_us@2000/s", ("e2e_latency_pool", "p50_us"), False),
}


def peers_round() -> dict[str, dict[str, dict[str, float]]]:
    """Each peer's figures by mode, from the harness's TSV (peer mode bytes
    metric value); the peer named by its first word (redis-7.0-streams:
    redis)."""
    env = {**os.environ, "PEERS": " ".join(PEERS), "SIZES": "100"}
    for peer in PEERS:
        var, default = PEER_MODES[peer]
        env.setdefault(var, default)
    out = subprocess.run(["bash", os.path.join(PEERS_DIR, "run_all.sh")], check=True, env=env,
                         stdout=subprocess.PIPE, text=True).stdout
    peers: dict[str, dict[str, dict[str, float]]] = {}
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) == 5 and parts[0] != "peer" and not line.startswith("#"):
            peer = parts[0].split("-")[0]
            peers.setdefault(peer, {}).setdefault(parts[1], {})[parts[3]] = float(parts[4])
    missing = [p for p in PEERS if p not in peers]
    if missing:
        sys.exit(f"beside_peers: the peer harness printed no figures for {missing} "
                 f"(its logs: /tmp/peers-run)")
    return peers


def duomq_round() -> dict[str, dict[str, dict]]:
    """duomq's figures by mode ("FLUSH/REPLICATION") and benchmark name."""
    out = subprocess.run([sys.executable, os.path.join(HERE, "run_all.py")], check=True,
                         env={**os.environ, "SIZES": "100", "MODES": MODES},
                         stdout=subprocess.PIPE, text=True).stdout
    modes: dict[str, dict[str, dict]] = {}
    for line in out.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            mode = "/".join(filter(None, (r["flush"], r["replication"], r.get("slave_flush"))))
            modes.setdefault(mode, {})[r["name"]] = r
    # a figure of sends that were refused or not durable compares nothing
    bad = {mode: r["statuses"] for mode, runs in modes.items() for r in runs.values()
           if set(r.get("statuses", {})) - {"SEND_OK"} or r.get("errors")}
    if bad:
        sys.exit(f"beside_peers: duomq's sends were not all SEND_OK: {bad} (the brokers' "
                 f"logs say why; a full disk did this once)")
    return modes


def summary(rounds: list[dict]) -> dict:
    """Per pairing and figure: both systems' medians over the rounds and
    duomq's ratio (above 1 is better for duomq, for latencies too)."""
    out = {}
    for peer, peer_mode, ours_mode in PAIRS:
        if peer not in PEERS or ours_mode not in rounds[0]["duomq"]:
            continue
        figures = {}
        for figure, (metric, (name, field), higher) in FIGURES.items():
            if name not in rounds[0]["duomq"][ours_mode]:      # POOL=0: no _pool figures
                continue
            ours = [r["duomq"][ours_mode][name][field] for r in rounds]
            theirs = [r["peers"][peer][peer_mode][metric] for r in rounds]
            a, b = statistics.median(ours), statistics.median(theirs)
            figures[figure] = {"duomq": a, peer: b,
                               "ratio": round(a / b if higher else b / a, 3)}
        out[f"duomq {ours_mode} vs {peer} {peer_mode}"] = figures
    return out


def main() -> int:
    if not os.path.isfile(os.path.join(PEERS_DIR, "run_all.sh")):
        print(f"beside_peers: no peer harness at {PEERS_DIR} (set PEERS_DIR)", file=sys.stderr)
        return 2
    unknown = [p for p in PEERS if p not in PEER_MODES]
    if unknown:
        print(f"beside_peers: unknown peers {unknown} (known: {sorted(PEER_MODES)})",
              file=sys.stderr)
        return 2
    rounds = []
    for i in range(ROUNDS):
        order = ("peers", "duomq") if i % 2 == 0 else ("duomq", "peers")
        r = {system: (peers_round() if system == "peers" else duomq_round()) for system in order}
        rounds.append(r)
        for system in order:
            print(json.dumps({"bench": "beside_peers", "round": i + 1, "system": system,
                              "figures": r[system]}), flush=True)
    print(json.dumps({"bench": "beside_peers", "rounds": ROUNDS, "body_bytes": 100,
                      "pairs": summary(rounds)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
