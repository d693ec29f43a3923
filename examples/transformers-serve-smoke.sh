#!/usr/bin/env bash
# evalkit against a running `transformers serve` (a strict OpenAI-only server): check, bench, stress with a long
# prompt near the model's context (so a cancel lands inside a prefill), a capability subset, and the report.
# Exits 1 when any step exits non-zero or any run recorded an evalkit error.
#
#   bash examples/transformers-serve-smoke.sh BASE_URL OUT_DIR [DATA_DIR]
#   e.g. bash examples/transformers-serve-smoke.sh http://127.0.0.1:8000/v1 results/transformers-serve ../shared/datasets
#
# Environment: MODEL (default: the first id /v1/models lists), LONG_TOKENS (default 7000: SmolLM2's context is 8192,
# and the long request asks 64 tokens more), CYCLES (default 3), CAP_LIMIT (questions per dataset, default 5),
# SERVER_LOG (the server's log file, kept beside the figures), BENCH_TOKENS (default 256).
# A small model on a GPU prefills 7000 tokens in well under the built-in cycle's 0.5-3 s insert and 1-4 s cancel
# times, so stress runs the same cycle (same scenario names, so the same verdicts) from a file written here with
# earlier times: INSERT_AT (default "0.02, 0.25") and CANCEL_AT (default "0.03, 0.3"), seconds after the long request
# is sent. Set them from the long prefill the first cycle shows (long_prefill_s): inside it, or the verdicts say
# "not exercised". SCENARIO=builtin keeps the write-up's times.
#
# Starting the server (transformers 5.x; its GGUF loader de-quantizes to torch weights, saved once):
#   pip install 'transformers[serving]' gguf accelerate
#   python - <<'EOF'
#   from transformers import AutoModelForCausalLM, AutoTokenizer
#   src, gguf, out = "DIR_WITH_THE_GGUF", "SmolLM2-135M-Instruct-Q8_0.gguf", "smollm2-hf"
#   AutoModelForCausalLM.from_pretrained(src, gguf_file=gguf).save_pretrained(out)
#   AutoTokenizer.from_pretrained(src, gguf_file=gguf).save_pretrained(out)
#   EOF
#   transformers serve --continuous-batching --port 8000 --force-model ./smollm2-hf > serve.log 2>&1 &
# (`transformers serve --help` names the flags of the installed version; older ones call --force-model otherwise.)
set -uo pipefail

BASE_URL=${1:?usage: $0 BASE_URL OUT_DIR [DATA_DIR]}
OUT=${2:?usage: $0 BASE_URL OUT_DIR [DATA_DIR]}
DATA_DIR=${3:-${EVALKIT_DATA_DIR:-../shared/datasets}}
LONG_TOKENS=${LONG_TOKENS:-7000}
CYCLES=${CYCLES:-3}
CAP_LIMIT=${CAP_LIMIT:-5}
BENCH_TOKENS=${BENCH_TOKENS:-256}
mkdir -p "$OUT"

common=(--base-url "$BASE_URL" --out "$OUT")
[ -n "${MODEL:-}" ] && common+=(--model "$MODEL")
[ -n "${SERVER_LOG:-}" ] && common+=(--server-log "$SERVER_LOG")
failed=0

step() {  # step NAME ARGS...: run one evalkit command, keep its output, note a failure
  local name=$1; shift
  echo "== $name: evalkit $*" >&2
  if ! evalkit "$@" 2>&1 | tee "$OUT/$name.log"; then
    echo "== $name FAILED (see $OUT/$name.log)" >&2
    failed=1
  fi
}

step check check "${common[@]}" --name check --thinking off
step bench bench "${common[@]}" --name bench --runs 3 --max-tokens "$BENCH_TOKENS" --concurrency 2
scenario=()
if [ "${SCENARIO:-}" != builtin ]; then
  INSERT_AT=${INSERT_AT:-0.02, 0.25}
  CANCEL_AT=${CANCEL_AT:-0.03, 0.3}
  cat > "$OUT/short-prefill-cycle.toml" <<EOF
# The built-in cycle (prompts/stress/default-cycle.toml) with insert and cancel times for a fast prefill.
[[scenario]]
name = "long_alone"
  [[scenario.request]]
  id = "long"
  prompt = "long"

[[scenario]]
name = "short_insert"
  [[scenario.request]]
  id = "long"
  prompt = "long"
  [[scenario.request]]
  id = "short"
  prompt = "short"
  send = { offset = [$INSERT_AT] }

[[scenario]]
name = "double_insert"
  [[scenario.request]]
  id = "long"
  prompt = "long"
  [[scenario.request]]
  id = "short"
  prompt = "short"
  repeat = 2
  send = { offset = [$INSERT_AT] }

[[scenario]]
name = "cancel_then_short"
  [[scenario.request]]
  id = "long"
  prompt = "long"
  cancel = { offset = [$CANCEL_AT] }
  [[scenario.request]]
  id = "short"
  prompt = "short"
  send = { after = "long", on = "done" }

[[scenario]]
name = "concurrent_gen"
  [[scenario.request]]
  id = "pair1"
  role = "gen_pair"
  prompt = "count"
  [[scenario.request]]
  id = "pair2"
  role = "gen_pair"
  prompt = "count"
  [[scenario.request]]
  id = "solo1"
  role = "gen_solo"
  same_as = "pair1"
  send = { after = ["pair1", "pair2"], on = "done" }
  [[scenario.request]]
  id = "solo2"
  role = "gen_solo"
  same_as = "pair2"
  send = { after = "solo1", on = "done" }

[[scenario]]
name = "short_baseline"
  [[scenario.request]]
  id = "short1"
  role = "short"
  prompt = "short"
  [[scenario.request]]
  id = "short2"
  role = "short"
  prompt = "short"
  send = { after = "short1", on = "done" }
EOF
  scenario=(--scenario "$OUT/short-prefill-cycle.toml")
fi
step stress stress "${common[@]}" --name stress "${scenario[@]}" --cycles "$CYCLES" --seed 42 \
  --long-tokens "$LONG_TOKENS" --long-max-tokens 64 --gen-tokens 256 --no-progress
step capability capability "${common[@]}" --name capability-off --thinking off --limit "$CAP_LIMIT" \
  --data-dir "$DATA_DIR"
step report report "$OUT/bench" "$OUT/stress" "$OUT/capability-off" -o "$OUT/report.md"

# 0 evalkit errors: every summary's error count, and the refused fields the preflight left out.
python3 - "$OUT" <<'EOF' || failed=1
import json, sys
from pathlib import Path
out, bad = Path(sys.argv[1]), 0
for name in ("bench", "stress", "capability-off"):
    run = out / name
    if not (run / "summary.json").is_file():
        print(f"{name}: no summary.json"); bad = 1; continue
    s = json.loads((run / "summary.json").read_text())
    m = json.loads((run / "manifest.json").read_text())
    errors = s.get("errors")
    if errors is None:  # capability: requests that failed
        lines = [json.loads(x) for x in (run / "requests.jsonl").read_text().splitlines() if x.strip()]
        errors = sum(x.get("status") != "ok" for x in lines)
    not_sent = (m.get("field_support") or {}).get("not_sent")
    print(f"{name}: {errors} errors; fields not sent: {', '.join(not_sent or []) or 'none'}"
          + (f"; length {s.get('length_mode')}" if name == "bench" else ""))
    bad |= bool(errors)
if (out / "stress" / "summary.json").is_file():
    d = json.loads((out / "stress" / "summary.json").read_text())["diagnoses"]
    for key in ("cancel_aborts", "head_of_line_blocking", "long_hurt_by_inserts", "concurrency"):
        v = d.get(key) or {}
        print(f"stress {key}: {v.get('verdict')} ({v.get('evidence')}) {v.get('why', '')}")
sys.exit(bad)
EOF
echo "report: $OUT/report.md" >&2
exit $failed
