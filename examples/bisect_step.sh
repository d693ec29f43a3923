#!/usr/bin/env bash
# One `git bisect run` step for a throughput regression: build the server at the checked-out commit, start it on
# a port of its own, wait until it answers, measure with `evalkit bench` in bisect mode, stop the server.
#
#   cd ~/src/fastllm
#   git bisect start a2bf07fd 14f849af          # bad, good
#   BISECT_SERVER='ftllm server -p /models/qwen --port $BISECT_PORT ...' \
#   BISECT_GOOD=96 BISECT_BAD=89 git bisect run /path/to/evalkit/examples/bisect_step.sh
#   git bisect reset
#   evalkit report --bisect-log .git/evalkit-bisect-log.jsonl -o bisect.md   # the commit table
#
# Exit codes, as git bisect reads them: 0 good (rate >= BISECT_GOOD), 1 bad (rate <= BISECT_BAD), 125 skip (in
# between, the build failed, or the server never came up), 255 abort (evalkit was called wrongly: fix and rerun).
#
# Settings (environment variables):
#   BISECT_BUILD       builds the server here; default the FastLLM CUDA build of the write-up. Failure -> skip.
#   BISECT_SERVER      starts the server listening on $BISECT_PORT (required). Runs in its own process group.
#   BISECT_PORT        default 8099, away from the server you use every day
#   BISECT_BASE_URL    default http://127.0.0.1:$BISECT_PORT/v1
#   BISECT_HEALTH_URL  polled until it answers 2xx; default http://127.0.0.1:$BISECT_PORT/health
#   BISECT_WAIT_S      seconds to wait for it (default 900: a 27B model loads slowly)
#   BISECT_GOOD, BISECT_BAD   thresholds in tok/s (required); BISECT_METRIC prompt name (default code)
#   BISECT_RUNS        runs per step, median judged (default 3); BISECT_MAX_TOKENS (default 512)
#   BISECT_LOG         JSONL log (default .git/evalkit-bisect-log.jsonl: inside .git, so checkouts never touch it)
#   BISECT_OUT         parent of each step's run directory (default .git/evalkit-bisect-runs)
#   EVALKIT            how to call evalkit (default: evalkit)
set -u

: "${BISECT_SERVER:?set BISECT_SERVER to the command that starts the server on \$BISECT_PORT}"
: "${BISECT_GOOD:?set BISECT_GOOD (tok/s at or above which a commit is good)}"
: "${BISECT_BAD:?set BISECT_BAD (tok/s at or below which a commit is bad)}"
export BISECT_PORT="${BISECT_PORT:-8099}"
BASE_URL="${BISECT_BASE_URL:-http://127.0.0.1:${BISECT_PORT}/v1}"
HEALTH_URL="${BISECT_HEALTH_URL:-http://127.0.0.1:${BISECT_PORT}/health}"
WAIT_S="${BISECT_WAIT_S:-900}"
GIT_DIR="$(git rev-parse --absolute-git-dir)"
LOG="${BISECT_LOG:-${GIT_DIR}/evalkit-bisect-log.jsonl}"
OUT="${BISECT_OUT:-${GIT_DIR}/evalkit-bisect-runs}"
EVALKIT="${EVALKIT:-evalkit}"
COMMIT="$(git rev-parse --short HEAD)"
SERVER_LOG="${OUT}/server-${COMMIT}.log"
mkdir -p "$OUT"

DEFAULT_BUILD='mkdir -p build-fastllm && cd build-fastllm &&
  cmake .. -DUSE_CUDA=ON -DUSE_NUMAS=OFF -DCUDA_ARCH=75 -DCMAKE_CUDA_ARCHITECTURES=75 >/dev/null &&
  make -j"$(nproc)" fastllm_tools >/dev/null && cd tools && pip install --no-deps --force-reinstall . >/dev/null'

echo "bisect step at ${COMMIT}: building" >&2
if ! bash -c "${BISECT_BUILD:-$DEFAULT_BUILD}" >"${OUT}/build-${COMMIT}.log" 2>&1; then
  echo "build failed at ${COMMIT} (see ${OUT}/build-${COMMIT}.log): skip" >&2
  exit 125
fi

# setsid: the server and everything it spawns share one process group that we alone stop.
setsid bash -c "exec ${BISECT_SERVER}" >"$SERVER_LOG" 2>&1 &
SERVER_PID=$!
stop_server() {
  if kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM -- "-$SERVER_PID" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$SERVER_PID" 2>/dev/null
  fi
  wait "$SERVER_PID" 2>/dev/null
}
trap stop_server EXIT

deadline=$(( $(date +%s) + WAIT_S ))
until curl -sf -o /dev/null "$HEALTH_URL"; do
  if ! kill -0 "$SERVER_PID" 2>/dev/null || [ "$(date +%s)" -ge "$deadline" ]; then
    echo "server at ${COMMIT} did not come up (see ${SERVER_LOG}): skip" >&2
    exit 125
  fi
  sleep 0.2
done

# shellcheck disable=SC2086  # EVALKIT may be "python -m evalkit"
$EVALKIT bench --base-url "$BASE_URL" --out "$OUT" --name "bisect-${COMMIT}-$(date +%s)" \
  --runs "${BISECT_RUNS:-3}" --max-tokens "${BISECT_MAX_TOKENS:-512}" \
  --bisect-good-at-least "$BISECT_GOOD" --bisect-bad-at-most "$BISECT_BAD" \
  --metric "${BISECT_METRIC:-code}" --bisect-log "$LOG" >&2
rc=$?
case "$rc" in
  0|1|125) exit "$rc" ;;
  *) echo "evalkit bench exited ${rc}: stopping the bisect" >&2; exit 255 ;;
esac
