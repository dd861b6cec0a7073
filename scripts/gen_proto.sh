#!/usr/bin/env bash
# Regenerate proto/duomq_pb2.py from proto/duomq.proto (checked in; a test
# checks that regeneration gives the same file).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-proto}
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
"$PY" -m grpc_tools.protoc -Iproto --python_out="$out" --pyi_out="$out" proto/duomq.proto
