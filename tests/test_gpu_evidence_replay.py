"""The verdicts recomputed from the committed H200 runs (results/examples/gpu-h200): llama.cpp at -np 2 -b 512
shares steps between slots, and its log's own timestamps put every line on evalkit's clock.

These are real server logs: at -np 2 two inserted shorts were launched with the long request, into the other slot,
and got their first token in the long prefill's last step (6 of 6 blocked, not 4); the request after a cancel was
launched beside the cancelled prompt and waited ~1 s for its steps, not 0.06 s."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalkit.evidence.server_evidence import calibrate, read_evidence
from evalkit.evidence.wait_parts import IDLE_SAVE, IN_SLOT_PREFILL, UNATTRIBUTED, WORDS
from evalkit.runs.rundir import read_jsonl
from evalkit_stress.diagnose import diagnose
from evalkit_stress.verdicts import YES

GPU = Path(__file__).resolve().parents[1] / "results" / "examples" / "gpu-h200"


def _diagnose(run: Path) -> dict:
    summary = json.loads((run / "summary.json").read_text())
    lines = [r for r in read_jsonl(run / "requests.jsonl") if r.get("scenario") != "calibration"]
    return diagnose(summary["metrics"], lines, read_evidence(run)).to_json()


def test_np2_shared_steps_are_read_from_the_log() -> None:
    d = _diagnose(GPU / "llamacpp" / "np2" / "stress")
    hol = d["head_of_line_blocking"]
    assert hol["verdict"] == YES and hol["blocked"] == 6 and hol["judged"] == 6, hol["samples"]
    in_slot = [x for x in hol["samples"] if IN_SLOT_PREFILL in x["figures"]["wait_parts_s"]]
    assert len(in_slot) == 4  # the two of each cycle launched with the long request into the other slot
    assert all(x["figures"]["wait_parts_s"][IN_SLOT_PREFILL] == pytest.approx(4.9, abs=0.1) for x in in_slot)
    for s in d["cancel_aborts"]["samples"]:
        nd = s["next_delay"]
        assert "in a launched slot" in nd["cause"] and nd["wait_s"] > 0.6, nd
    # The long requests' pauses after their launch with no line in between are unattributed, with what would tell.
    gaps = [g for g in d["silent_gaps"] if g["cause"] == WORDS[UNATTRIBUTED]]
    assert gaps and all("--no-cache-idle-slots" in g["would_tell"] for g in gaps)
    assert any(g["idle_slots_at_launch"] and g["idle_slots_at_launch"][0]["n_tokens"] > 50000 for g in gaps)


def test_np1_verdicts_stay() -> None:
    d = _diagnose(GPU / "llamacpp" / "np1" / "stress")
    assert d["head_of_line_blocking"]["blocked"] == 6 and d["cancel_aborts"]["verdict"] == YES
    assert d["long_hurt_by_inserts"]["verdict"] == "no"
    assert all("prompt-cache" in s["next_delay"]["cause"] for s in d["cancel_aborts"]["samples"])


def test_log_clock_fits_the_read_times() -> None:
    rows = read_jsonl(GPU / "llamacpp" / "np2" / "stress" / "server_log.jsonl")
    clock = calibrate(rows)
    assert clock is not None and clock.lines > 400
    # every line was read at or after it was written
    from evalkit.evidence.server_evidence import server_stamp

    assert all(
        r["t"] >= server_stamp(r["line"]) + clock.offset - 1e-9
        for r in rows
        if not r.get("earlier") and server_stamp(r["line"]) is not None
    )
    # a restarted server (stamps going back) is not calibrated
    assert calibrate([{"t": 10.0 + i, "line": f"0.0{5 - i}.000.000 I x"} for i in range(4)]) is None


def test_fastllm_decode_lines_are_running_and_waiting_evidence() -> None:
    ev = read_evidence(GPU / "fastllm" / "stress-54k-mb2")
    logs = [g for g in ev.gauges if g.source == "log"]
    assert len(logs) >= 40 and {g.running for g in logs} <= {0.0, 1.0, 2.0}


def test_fastllm_cancel_is_judged_from_its_decode_lines() -> None:
    # --max_batch 1: 1.1 s after the cancel its log still counts 2 requests (contextLen 53760: the cancelled one,
    # decoding) while only the next one is ours; the cancelled prefill ran to its end.
    d = _diagnose(GPU / "fastllm" / "stress-54k-mb1")
    ca = d["cancel_aborts"]
    assert ca["verdict"] == "no" and ca["evidence"] == "log", ca


@pytest.mark.parametrize(
    "cfg",
    [
        "llamacpp/np1",
        "llamacpp/np2",
        "llamacpp-issue27/np1",
        "llamacpp-issue27/np2-lv4",
        "llamacpp-issue27/np2-noidle",
        "llamacpp-issue27/np2-noram",
    ],
)
def test_every_verdict_agrees_with_the_log_line_by_line(cfg: str) -> None:
    from evalkit.realserver.log_compare import compare

    text, checks, agree = compare(GPU / cfg / "stress")
    assert checks >= 15 and agree == checks, "\n".join(ln for ln in text if ln.startswith("DIFFER"))


def test_trace_log_names_the_idle_slot_save_and_the_flags_move_the_figures() -> None:
    runs = GPU / "llamacpp-issue27"
    lv4 = _diagnose(runs / "np2-lv4" / "stress")
    gaps = lv4["silent_gaps"]
    assert len(gaps) == 4 and all(g["cause"] == WORDS[IDLE_SAVE] and g["gap_s"] > 3.5 for g in gaps), gaps
    # --cache-ram 0: no prompt cache, no pause, and the short request waits only for the long prefill's steps
    noram = _diagnose(runs / "np2-noram" / "stress")
    assert not noram["silent_gaps"]
    assert noram["long_hurt_by_inserts"]["figures"]["ttft_ratio_p50"] < 1.05
    # --no-cache-idle-slots: a cancelled request launched only after its slot's cache store, released at once
    noidle = _diagnose(runs / "np2-noidle" / "stress")
    s = noidle["cancel_aborts"]["samples"][0]
    assert s["verdict"] == YES and s["granularity"] == "before it started", s
    assert "prompt-cache store for the cancelled request's slot" in s["next_delay"]["cause"]
