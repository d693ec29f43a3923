"""`evalkit stress --cycles 1` against a real llama-server, with one slot and with two slots and 512-token batches.

SmolLM2 prefills ~190 tok/s on 2 cores, so a 3000-token long prompt takes ~16 s: long enough that a short request
stuck behind it is unmistakable, short enough for two runs to fit in a few minutes. Long requests generate only 16
tokens: decoding after a 3000-token prompt is ~10-20x slower than after a short one on this CPU.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from realserver_support import read_jsonl, run_dir_from, run_evalkit

LONG_TOKENS = 3000
SERVERS = {
    "np1": dict(parallel=1, ctx=8192),
    "np2-b512": dict(parallel=2, ctx=16384, batch=512, ubatch=512),
}
_RESULTS: dict[str, dict[str, Any]] = {}


def _stress(llama_server, tmp_path: Path, label: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    if label in _RESULTS:
        return _RESULTS[label]["summary"], _RESULTS[label]["lines"]
    srv = llama_server(**SERVERS[label])
    proc = run_evalkit(["stress", "--base-url", srv.base_url, "--cycles", "1", "--seed", "42",
                        "--long-tokens", str(LONG_TOKENS), "--long-max-tokens", "16", "--gen-tokens", "256",
                        "--no-progress", "--out", str(tmp_path), "--name", f"stress-{label}"],
                       cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    run = run_dir_from(proc)
    summary = json.loads((run / "summary.json").read_text())
    lines = read_jsonl(run / "requests.jsonl")
    _RESULTS[label] = {"summary": summary, "lines": lines, "log": srv.log_text()}
    return summary, lines


def _p50(summary: dict[str, Any], metric: str) -> float:
    return summary["metrics"][metric]["p50"]


def _diagnoses(summary: dict[str, Any]) -> dict[str, Any]:
    return summary.get("diagnoses") or summary.get("diagnosis") or {}


@pytest.mark.parametrize("label", list(SERVERS))
def test_stress_run_is_clean_and_long_prompts_are_token_accurate(llama_server, tmp_path: Path, label: str) -> None:
    """Zero errors; every long prompt within 2% of --long-tokens by the server's own count; answers printed."""
    summary, lines = _stress(llama_server, tmp_path, label)
    wrong = [x for x in lines if x.get("correct") is False or x.get("answer_ok") is False]
    print(f"\n[realserver] stress {label}: {summary['requests']} requests, errors {summary['errors']}, "
          f"wrong answers {summary['wrong_answers']} (a 135M model; not a failure)")
    for x in wrong[:8]:
        print(f"[realserver]   wrong: {x.get('scenario')} {x.get('expected')!r} got {x.get('content', '')[:80]!r}")
    for name, m in summary["metrics"].items():
        if isinstance(m, dict) and "p50" in m:
            print(f"[realserver]   {name}: p50 {m['p50']}, max {m.get('max')}")
    for text in summary.get("diagnosis_lines", []):
        print(f"[realserver]   {text}")
    assert summary["errors"] == 0, summary.get("error_samples")
    longs = [x for x in lines if x.get("long_tokens_target") or x.get("kind") == "long"
             or str(x.get("scenario", "")).startswith("long") and x.get("prompt_tokens")]
    measured = [x["prompt_tokens"] for x in longs if x.get("prompt_tokens") and x["prompt_tokens"] > LONG_TOKENS / 2]
    assert measured, "no long prompt's prompt_tokens recorded"
    print(f"[realserver]   long prompts' prompt_tokens (server usage): {measured}")
    assert all(abs(n / LONG_TOKENS - 1) <= 0.02 for n in measured), measured


def test_effective_concurrency_is_the_slot_count(llama_server, tmp_path: Path) -> None:
    """Two generations at once take turns on one slot and run together on two."""
    one, _ = _stress(llama_server, tmp_path, "np1")
    two, _ = _stress(llama_server, tmp_path, "np2-b512")
    print(f"\n[realserver] effective_concurrency: -np 1 -> {_diagnoses(one)['effective_concurrency']} "
          f"(raw {_diagnoses(one).get('effective_concurrency_raw')}), -np 2 -> "
          f"{_diagnoses(two)['effective_concurrency']} (raw {_diagnoses(two).get('effective_concurrency_raw')}); "
          f"combined tok/s {_p50(one, 'concurrent_combined_tok_s'):.1f} vs {_p50(two, 'concurrent_combined_tok_s'):.1f}")
    assert _diagnoses(one)["effective_concurrency"] == 1
    assert _diagnoses(two)["effective_concurrency"] == 2


def test_short_insert_waits_behind_the_prefill_only_with_one_slot(llama_server, tmp_path: Path) -> None:
    """`-np 1`: the short request waits for most of the long prefill; `-np 2 -b 512`: it is let in within a batch."""
    one, _ = _stress(llama_server, tmp_path, "np1")
    two, _ = _stress(llama_server, tmp_path, "np2-b512")
    t1, t2 = _p50(one, "short_insert_ttft_s"), _p50(two, "short_insert_ttft_s")
    hol1, hol2 = _diagnoses(one)["head_of_line_blocking"], _diagnoses(two)["head_of_line_blocking"]
    print(f"\n[realserver] short-insert TTFT p50: -np 1 {t1:.2f} s, -np 2 -b 512 {t2:.2f} s ({t1 / t2:.1f}x); "
          f"long prefill alone {_p50(one, 'long_prefill_s'):.1f} s / {_p50(two, 'long_prefill_s'):.1f} s; "
          f"head-of-line blocking: {hol1} / {hol2}")
    assert t1 >= 3 * t2
    assert hol1["detected"] is True
    assert hol2["detected"] is False


def test_what_llama_cpp_does_with_a_cancelled_prefill(llama_server, tmp_path: Path) -> None:
    """Measured and reported: the next request's TTFT after a cancel, against the prefill that was left."""
    for label in SERVERS:
        summary, _ = _stress(llama_server, tmp_path, label)
        ca = _diagnoses(summary)["cancel_aborts"]
        log = _RESULTS[label]["log"]
        print(f"\n[realserver] cancel on {label}: post-cancel TTFT p50 {_p50(summary, 'post_cancel_ttft_s'):.2f} s; "
              f"diagnosis {ca}; server log says 'cancel task': {'cancel task' in log}")
        assert ca["aborts"] is not None, ca
    # With 512-token batches the abort lands within ~3 s, far inside a 3000-token prefill.
    assert _diagnoses(_RESULTS["np2-b512"]["summary"])["cancel_aborts"]["aborts"] is True
