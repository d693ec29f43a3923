#!/usr/bin/env bash
# The full suite on a busy machine (#39 item 9): one busy loop per core at the suite's own priority, then the README's
# test command with CI=true (a real server that is not provisioned fails instead of skipping). Prints the load average
# seen during the run, the wall time and pytest's last line, and exits with pytest's code.
#
#   bash benchmarks/suite_under_load.sh [PYTEST ARGS...]
#
# Run it from a checkout whose venv is active and whose real servers are provisioned (.ci/provision_llama_server.sh).
set -uo pipefail
cores=$(nproc)
pids=()
for _ in $(seq "$cores"); do
  sh -c 'while :; do :; done' &
  pids+=($!)
done
stop_loops() { kill "${pids[@]}" 2>/dev/null; }
trap stop_loops EXIT INT TERM
echo "suite-under-load: ${cores} busy loops (pids ${pids[*]}), start $(date -u +%FT%TZ)"
sample_load() {
  while :; do
    cut -d' ' -f1 /proc/loadavg
    sleep 30
  done
}
loadfile=$(mktemp)
sample_load >"$loadfile" &
sampler=$!
start=$(date +%s)
CI=true python -m pytest -q "$@" 2>&1 | tee "${SUITE_LOG:-/dev/null}" | tail -n 40
rc=${PIPESTATUS[0]}
kill "$sampler" 2>/dev/null
wall=$(( $(date +%s) - start ))
sort -n "$loadfile" | awk '{a[NR]=$1} END {if (NR) printf "suite-under-load: load average 1-min min %s median %s max %s (%d samples)\n", a[1], a[int((NR+1)/2)], a[NR], NR}'
rm -f "$loadfile"
echo "suite-under-load: pytest exit ${rc} in ${wall} s, end $(date -u +%FT%TZ)"
exit "$rc"
