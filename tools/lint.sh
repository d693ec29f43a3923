#!/usr/bin/env bash
# The style and type gate: ruff check, ruff format --check, mypy; each step's time is printed, the first failure
# stops it. `.ci/run` runs it before the tests; run it locally with `bash tools/lint.sh` (ruff and mypy from
# `pip install -e '.[lint]'`, pinned in pyproject).
#
# mypy cannot follow setuptools' editable finder, which maps the import names evalkit_evals, evalkit_stress ...
# to the design card's folders (evals/, stress/ ...); a link tree under build/typecheck gives it the same names.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${EVALKIT_LINT_BIN:-$(dirname "$(command -v python)")}
step() {  # step NAME COMMAND...: run it, print its time, stop on failure
  local name=$1 t0 rc=0
  shift
  t0=$EPOCHREALTIME
  "$@" || rc=$?
  awk -v n="$name" -v ok="$([ $rc = 0 ] && echo passed || echo FAILED)" -v a="$t0" -v b="$EPOCHREALTIME" \
    'BEGIN { printf "lint: %s %s in %.1f s\n", n, ok, b - a }' 
  return $rc
}
links=build/typecheck
mkdir -p "$links"
python - "$links" <<'PY'
import os, sys
try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib
root, out = os.getcwd(), sys.argv[1]
dirs = tomllib.load(open("pyproject.toml", "rb"))["tool"]["setuptools"]["package-dir"]
for name, folder in dirs.items():
    link = os.path.join(out, name)
    if os.path.islink(link):
        os.unlink(link)
    os.symlink(os.path.relpath(os.path.join(root, folder), out), link)
PY
packages=(-p evalkit -p evalkit_evals -p evalkit_stress)
step "ruff check" "$bin/ruff" check --quiet --output-format concise .
step "ruff format --check" "$bin/ruff" format --check --quiet .
step "mypy" "$bin/mypy" "${packages[@]}"
