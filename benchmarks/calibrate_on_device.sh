#!/usr/bin/env bash
# bench_calibration.py's stress runs on a many-core machine with no network (the lent GPU machine's 16 cores; its GPU
# is not used): PLAN... are bench_calibration's collect flags (e.g. --aa 96 --decode5 48 --parallel 48). Needs the
# wheels of evalkit and of what that machine lacks in .whl/ (built from a clean export of the commit); reads the
# pairs there too and writes $OUT/calibration-TAG.txt, the rows (calibration-rows.jsonl) and the runs' files.
set -euo pipefail
tag=$1
shift
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
script=$PWD/benchmarks/bench_calibration.py
mkdir -p /tmp/runs && cd /tmp
{ nproc; uptime; } | tee "${OUT:-/tmp}/calibration-$tag.txt"
python3 "$script" --collect /tmp/runs "$@" 2>&1 | tee -a "${OUT:-/tmp}/calibration-$tag.txt"
# The read is bounded (READ_S seconds, default 200) so the runs always come back within a call's limit; a read cut
# short is done again off the machine from the runs' files.
timeout "${READ_S:-200}" python3 "$script" --read /tmp/runs --workers 16 ${READ_FLAGS:-} 2>&1 \
  | tee -a "${OUT:-/tmp}/calibration-$tag.txt" || echo "read cut short after ${READ_S:-200} s" | tee -a "${OUT:-/tmp}/calibration-$tag.txt"
cp /tmp/runs/calibration-rows.jsonl "${OUT:-/tmp}/calibration-rows-$tag.jsonl" 2>/dev/null || true
cd /tmp/runs
tar cf - */manifest.json */cycles.jsonl */requests.jsonl */summary.json */check.json */server_log.jsonl 2>/dev/null \
  | xz -6 -T0 | split -b 15M - "${OUT:-/tmp}/runs-$tag.tar.xz."
ls -la "${OUT:-/tmp}"
