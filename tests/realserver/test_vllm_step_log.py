"""vLLM's step log as the cancel and head-of-line evidence, against vLLM's own truth (issue 57, item 1).

The session's default vLLM (conftest `vllm_server()`: vLLM 0.32's CPU defaults, a 2048-token step budget, started
with VLLM_LOGGING_LEVEL=DEBUG so it logs each engine step) gets one seeded `evalkit stress` run of ten cycles of a
short insert and a cancel into a ~1000-token prompt, each cycle's send and cancel times drawn from its own seeded
generator. Its prefill is one engine step, so every cancel (0.2-0.6 s after sending) lands inside a step that runs
to its end: the cancel verdict must read "no", with vLLM's step log as its evidence, in every cycle. The truth is
vLLM's own: each cancelled prompt sent again for one token, whose prefix-cache hits are exactly the blocks the
engine computed (whole: it ran to its end). A head-of-line sample is held to the client's order of first tokens: a
short whose prompt entered a step before the long prompt's last one answers first.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from realserver_support import read_jsonl, run_dir_from, run_evalkit
from vllm_support import BLOCK_TOKENS, cancelled_prompts, computed_prefix_tokens, whole_blocks

from evalkit_stress.diagnose import diagnosis_lines

pytestmark = pytest.mark.realserver

SEED, CYCLES = 57, 10
LONG_TOKENS = 1000  # one engine step under the 2048-token budget; ~1.3 s on one core, more on a busy machine
GEN_TOKENS = 64
STEP_LOG = "vllm_steps"
CYCLE = """
[[scenario]]
name = "short_insert"

  [[scenario.request]]
  id = "long"
  prompt = "long"

  [[scenario.request]]
  id = "short"
  prompt = "short"
  send = { offset = [0.2, 0.5] }

[[scenario]]
name = "cancel_then_short"

  [[scenario.request]]
  id = "long"
  prompt = "long"
  cancel = { offset = [0.2, 0.6] }

  [[scenario.request]]
  id = "short"
  prompt = "short"
  send = { after = "long", on = "done" }
"""


def test_step_log_settles_every_cancel_and_insert_as_vllm_did(vllm_server: Any, tmp_path: Path) -> None:
    started = time.monotonic()
    srv = vllm_server()
    scenario = tmp_path / "cycle.toml"
    scenario.write_text(CYCLE)
    argv = ["stress", "--base-url", srv.base_url, "--scenario", str(scenario), "--cycles", str(CYCLES)]
    argv += ["--seed", str(SEED), "--long-tokens", str(LONG_TOKENS), "--long-max-tokens", "16"]
    argv += ["--short-max-tokens", "16", "--gen-tokens", str(GEN_TOKENS), "--timeout-s", "300"]
    argv += ["--server-log", str(srv.log_path), "--no-progress", "--reuse-prompts"]
    proc = run_evalkit([*argv, "--out", str(tmp_path), "--name", "steps"], cwd=tmp_path, timeout_s=600)
    assert proc.returncode == 0, proc.stderr
    run = run_dir_from(proc)
    summary = json.loads((run / "summary.json").read_text())
    d = summary["diagnoses"]
    lines = {r["request_id"]: r for r in read_jsonl(run / "requests.jsonl") if r.get("request_id")}
    texts = cancelled_prompts(run, SEED, CYCLES, LONG_TOKENS, GEN_TOKENS)
    ran = time.monotonic() - started

    print(f"[realserver] vLLM step log: {' | '.join(diagnosis_lines(d, summary['metrics'])[:2])}")
    # -- cancel: every cycle "no" from the step log, and vLLM's prefix cache says the engine computed it all
    cancels = d["cancel_aborts"]["samples"]
    assert len(cancels) == CYCLES, cancels
    for s in cancels:
        hits, prompt = computed_prefix_tokens(srv, texts[s["cycle"]])
        f = s.get("figures") or {}
        print(
            f"[realserver] vLLM step log, cycle {s['cycle']}: cancel {s['verdict']} ({s['evidence']}); steps before "
            f"the abort {f.get('steps_before_abort')}, after {f.get('steps_after_abort')}; computed "
            f"{f.get('computed_tokens')} of {f.get('prompt_tokens')}; vLLM's prefix cache on re-send: {hits} of "
            f"{prompt} (whole blocks {whole_blocks(prompt)})"
        )
        assert (s["verdict"], s["evidence"]) == ("no", STEP_LOG), s
        assert "vLLM's step log" in s["why"] and "Aborted request(s)" in f["settled_by"], s
        assert f["prompt_tokens"] == prompt, (f, prompt)  # the details line's count is vLLM's own usage count
        # the truth: the blocks the engine computed, exactly as the step lines count them
        assert hits == min(f["computed_tokens"] // BLOCK_TOKENS * BLOCK_TOKENS, whole_blocks(prompt)), (s, hits)
        assert hits == whole_blocks(prompt), (s, hits)
    ca = d["cancel_aborts"]
    assert (ca["verdict"], ca["evidence"], ca["judged_cycles"]) == ("no", STEP_LOG, CYCLES), ca
    said = diagnosis_lines(d, summary["metrics"])  # what the terminal printed
    assert any(ln.startswith("cancel aborts the prefill: no") and "evidence: vLLM's step log" in ln for ln in said)

    # -- head-of-line: each sample the step log decided agrees with the order of first tokens
    hol = d["head_of_line_blocking"]["samples"]
    by_steps = [s for s in hol if s["evidence"] == STEP_LOG]
    for s in by_steps:
        short = lines[s["request_id"]]
        long = lines[short["request_id"].rsplit("-", 1)[0] + "-long"]
        first_after = short["t_first_token"] >= long["t_first_token"] - 0.05
        print(
            f"[realserver] vLLM step log, insert {s['request_id']}: {s['verdict']}; short's first token "
            f"{short['t_first_token'] - long['t_first_token']:+.3f} s from the long's; {s['figures']['steps']}"
        )
        assert (s["verdict"] == "yes") == first_after, (s, short, long)
    assert by_steps and all(s["verdict"] == "yes" for s in by_steps), hol
    print(
        f"[realserver] vLLM step log: {len(cancels)} cancels 'no', {len(by_steps)} of {len(hol)} inserts decided by "
        f"the step lines, in {ran:.0f} s (server and run) + {time.monotonic() - started - ran:.0f} s (the re-sends)"
    )
