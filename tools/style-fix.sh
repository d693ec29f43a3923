#!/usr/bin/env bash
# The mechanical style pass over the whole tree, run once by hand (never in CI): ruff's safe fixes (import order,
# pyupgrade to the 3.10 floor, unused noqa), then ruff's formatter (line length 120), then the gate itself.
# What is left after it (a long string or comment, a bugbear finding) is fixed by hand; tools/lint.sh says where.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${EVALKIT_LINT_BIN:-$(dirname "$(command -v python)")}
"$bin/ruff" check --fix --silent --exit-zero .
"$bin/ruff" format --quiet .
"$bin/ruff" check --fix --silent --exit-zero .  # a fix the formatter's layout made possible
"$bin/ruff" format --quiet .
bash tools/lint.sh
