#!/usr/bin/env bash
# Run the whole suite (after the static checks, scripts/lint.sh). pytest's
# exit 5 (no test ran) is a failure here.
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
# The suite starts real brokers that preallocate their segments: say what
# disk there is, so a run that fails for want of it says so.
df -h . "${TMPDIR:-/tmp}" | awk 'NR == 1 || !seen[$0]++'
args=("$@")
if [ $# -eq 0 ]; then          # the whole suite: the static checks first
  bash scripts/lint.sh || { echo "static checks failed (scripts/lint.sh)" >&2; exit 1; }
  # the suite must stay under 30 minutes: say what takes longest. Most of a
  # test is waiting (brokers, ZooKeeper, timeouts: one worker kept ~0.7 of two
  # cores busy), so two workers run side by side; the tests of the images
  # stay together on one (WORKER_GROUPS in testing/pytest_plugin.py)
  args=(--durations=30 -n "${DUOMQ_TEST_WORKERS:-2}" --dist loadgroup)
fi
"$VENV/bin/python" -m pytest "${args[@]}"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "no test ran: that is a failure" >&2
  exit 1
fi
exit "$rc"
