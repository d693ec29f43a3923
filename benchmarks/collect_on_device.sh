#!/usr/bin/env bash
# The 100 seeded repetitions of bench_time_to_verdict.py's stress pair, run on a many-core machine with no network
# (the lent GPU machine's 16 cores; its GPU is not used): FIRST SEEDS PARALLEL [TIME_SCALE]. Needs the wheels of
# evalkit and of what that machine lacks in .whl/ (see docs/until-sure.md); writes $OUT/runs-FIRST.tar.xz, the files
# `--runs-from` reads (manifest, cycles, requests, metrics, the server's log), about 90 KB a run.
set -euo pipefail
first=$1 seeds=$2 parallel=$3 scale=${4:-20}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
script=$PWD/benchmarks/bench_time_to_verdict.py
mkdir -p /tmp/runs && cd /tmp
python3 "$script" --collect /tmp/runs --first-seed "$first" --seeds "$seeds" --parallel "$parallel" --time-scale "$scale"
cd /tmp/runs
tar cf - */manifest.json */cycles.jsonl */requests.jsonl */metrics.jsonl */server_log.jsonl */check.json \
  | xz -6 -T0 > "${OUT:-/tmp}/runs-$first.tar.xz"
ls -la "${OUT:-/tmp}/runs-$first.tar.xz"
