#!/usr/bin/env bash
# The README's performance table in one sitting: the peers' harness for Redis
# 7 Streams (../shared/peers, its async and sync modes) and bench/run_all.py
# (duomq's four modes), 100-byte bodies, alternated ROUNDS times (default 2):
# the machine is noisy, so the two are compared only within one sitting.
# Prints one JSON line per figure group: {"round", "system", "mode", ...}.
#
#   make bench-beside-redis        (or: ROUNDS=3 scripts/bench_beside_redis.sh)
#
# PEERS_DIR points at the peer harness (default ../shared/peers); its
# run_all.sh installs redis-server if it is missing and starts and stops its
# own servers on private loopback ports.
set -euo pipefail
cd "$(dirname "$0")/.."
PEERS_DIR=${PEERS_DIR:-../shared/peers}
ROUNDS=${ROUNDS:-2}
PY=${PY:-.venv/bin/python}
if [ ! -f "$PEERS_DIR/run_all.sh" ]; then
  echo "bench_beside_redis: no peer harness at $PEERS_DIR/run_all.sh (set PEERS_DIR)" >&2
  exit 2
fi
for r in $(seq 1 "$ROUNDS"); do
  echo "bench_beside_redis: round $r of $ROUNDS: Redis" >&2
  PEERS=redis SIZES=100 bash "$PEERS_DIR/run_all.sh" | ROUND=$r $PY -c '
import json, os, sys
rows = {}
for line in sys.stdin:
    parts = line.rstrip("\n").split("\t")
    if len(parts) != 5 or parts[0] == "peer" or line.startswith("#"):
        continue
    peer, mode, size, metric, value = parts
    rows.setdefault((peer, mode, size), {})[metric] = float(value)
if not rows:
    sys.exit("bench_beside_redis: the peer harness printed no figures")
for (peer, mode, size), figures in rows.items():
    print(json.dumps({"round": int(os.environ["ROUND"]), "system": peer, "mode": mode,
                      "body_bytes": int(size), **figures}), flush=True)
'
  echo "bench_beside_redis: round $r of $ROUNDS: duomq" >&2
  SIZES=100 $PY bench/run_all.py | sed "s/^{/{\"round\": $r, \"system\": \"duomq\", /"
done
