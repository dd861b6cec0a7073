#!/usr/bin/env bash
# Run the whole suite. pytest's exit 5 (no test ran) is a failure here.
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
"$VENV/bin/python" -m pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "no test ran: that is a failure" >&2
  exit 1
fi
exit "$rc"
