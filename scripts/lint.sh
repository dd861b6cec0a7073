#!/usr/bin/env bash
# The checks that keep the code as it is meant to be, run by `make test`
# before the suite: ruff (pyflakes, pycodestyle, import order, bugbear,
# pyupgrade; pyproject's [tool.ruff]), mypy (pyproject's [tool.mypy]: clean,
# strict for the pure modules) and import-linter (the layers and the
# forbidden imports of pyproject's [tool.importlinter]) and the rooms' sizes
# (scripts/check_sizes.py: modules <= 600 lines, functions <= 80), no module
# cycle (scripts/check_cycles.py), and the
# documentation builds with `mkdocs build --strict`.
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
rc=0
"$VENV/bin/ruff" check . || rc=1
# mypy checks the package by its name: a directory where duomq is this repository
repo=$PWD
mypy=$(cd "$VENV/bin" && pwd)/mypy
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
ln -s "$repo" "$root/duomq"
(cd "$root" && "$mypy" --config-file "$repo/pyproject.toml" --cache-dir "$root/.mypy_cache" \
   -p duomq) || rc=1
"$VENV/bin/lint-imports" --no-cache || rc=1
# no module cycle anywhere (grimp's graph, TYPE_CHECKING imports included)
(cd "$root" && PYTHONPATH="$root" "$repo/$VENV/bin/python" "$repo/scripts/check_cycles.py") || rc=1
"$VENV/bin/python" scripts/check_sizes.py || rc=1
# the documentation: broken links, missing pages and stale generated references fail
"$VENV/bin/mkdocs" build --strict --quiet --site-dir "$root/site" || rc=1
exit "$rc"
