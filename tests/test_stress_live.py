"""`evalkit stress` against `evalkit sim` over real HTTP: the write-up's before/after builds, judged by the sim's
events.

Runs the issue's acceptance, `--cycles 3 --seed 42` with the full 54K-token long prompt against both profiles, at
`--time-scale 20` (`EVALKIT_TEST_STRESS_SCALE` overrides it). At that scale an inserted short is sent 25-150 ms into
the prefill and the after build's p95 is ~55 ms, so the 15% bound leaves ~8 ms for the client: it held once the
client stamped `t_sent` at the transport instead of before the SDK built the request (it was 16% off before).
A shorter prompt does not help: the before/after ratio needs the 54K prefill (with 27K the before build's wait is
~18 s against a ~1.15 s chunk, under 20x).
An `nvidia-smi` stand-in on the PATH exercises the GPU memory sampler.
The sim writes its llama.cpp-style log and the run follows it (`--server-log`): whether a cancel stopped the prefill
is the log's to say. Without it, the next request's reply (one token at this scale) is too short to tell a prefill
that stopped from one that runs on beside it on a server that serves two at once; CI once read a one-token reply's
"decode time" as 1.49x slower than alone and called the after build's cancel "can't tell" (#41).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evalkit.evidence.server_evidence import ServerEvidence
from evalkit.sim.launch import start_sim
from evalkit.stats import percentile
from evalkit_stress.diagnose import diagnose
from evalkit_stress.verdicts import CANT, YES

SCALE = os.environ.get("EVALKIT_TEST_STRESS_SCALE", "20")
LONG = 54000
FAKE_NVIDIA_SMI = """#!/bin/sh
# Stand-in for nvidia-smi: two GPUs whose used memory grows by 10 MiB a call (a leak to detect).
f="$(dirname "$0")/count"
n=$(cat "$f" 2>/dev/null || echo 0)
echo $((n + 1)) > "$f"
echo "0, $((1000 + n * 10)), 22528"
echo "1, $((2000 + n * 10)), 22528"
"""


def run_stress(
    base_url: str, out: Path, name: str, *flags: str, env: dict[str, str] | None = None, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "evalkit",
        "stress",
        "--base-url",
        base_url,
        "--out",
        str(out),
        "--name",
        name,
        "--no-progress",
        *flags,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def lines_of(run: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run / "requests.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    out = tmp_path_factory.mktemp("stress")
    bindir = tmp_path_factory.mktemp("bin")
    smi = bindir / "nvidia-smi"
    smi.write_text(FAKE_NVIDIA_SMI)
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    result = {}
    for profile in ("dual-2080ti-before", "dual-2080ti-after"):
        log = out / f"{profile}-server.log"
        with start_sim(["--profile", profile, "--time-scale", SCALE, "--server-log-file", str(log)]) as sim:
            p = run_stress(
                sim.base_url,
                out,
                profile,
                "--cycles",
                "3",
                "--seed",
                "42",
                "--time-scale",
                SCALE,
                "--long-tokens",
                str(LONG),
                "--gpu-interval",
                "0.2",
                "--server-log",
                str(log),
                env=env,
            )
            assert p.returncode == 0, p.stderr[-2000:]
            events = {e["request_id"]: e for e in sim.events()}
        run = Path(p.stdout.strip().splitlines()[-1])
        result[profile] = {
            "run": run,
            "stdout": p.stdout,
            "events": events,
            "lines": lines_of(run),
            "summary": json.loads((run / "summary.json").read_text()),
        }
    return result


def sim_p95(r: dict[str, Any], scenario: str) -> float:
    ttfts = [
        r["events"][x["request_id"]]["first_token"] - r["events"][x["request_id"]]["arrived"]
        for x in r["lines"]
        if x.get("scenario") == scenario and x.get("role") == "short"
    ]
    assert len(ttfts) >= 3
    p = percentile(ttfts, 95)
    assert p is not None
    return p


@pytest.mark.parametrize("profile", ["dual-2080ti-before", "dual-2080ti-after"])
def test_short_insert_p95_matches_the_sims_events(runs: dict[str, dict[str, Any]], profile: str) -> None:
    r = runs[profile]
    ours = r["summary"]["metrics"]["short_insert_ttft_s"]["p95"]
    truth = sim_p95(r, "short_insert")
    print(f"{profile}: short-insert TTFT p95 evalkit {ours:.4f} s, sim {truth:.4f} s ({(ours - truth) / truth:+.1%})")
    assert abs(ours - truth) <= 0.15 * truth, (ours, truth)


def test_before_after_ratio_and_diagnoses(runs: dict[str, dict[str, Any]]) -> None:
    before, after = runs["dual-2080ti-before"]["summary"], runs["dual-2080ti-after"]["summary"]
    ratio = before["metrics"]["short_insert_ttft_s"]["p95"] / after["metrics"]["short_insert_ttft_s"]["p95"]
    # The write-up's is 35 (39.5 s / 1.13 s). An order of magnitude holds on a busy machine too, which adds its
    # scheduling delay to the after build's short wait (x20 in model seconds): 14.5 at load average 5-7 on 2 cores.
    assert ratio >= 10, ratio
    assert before["diagnoses"]["effective_concurrency"] == 1
    assert after["diagnoses"]["effective_concurrency"] == 2
    assert before["diagnoses"]["cancel_aborts"]["aborts"] is False
    assert after["diagnoses"]["cancel_aborts"]["aborts"] is True
    assert before["diagnoses"]["head_of_line_blocking"]["detected"] is True
    assert after["diagnoses"]["head_of_line_blocking"]["detected"] is False
    assert "cancel aborts the prefill: no" in runs["dual-2080ti-before"]["stdout"]
    assert "effective concurrency: 2" in runs["dual-2080ti-after"]["stdout"]
    assert {s["evidence"] for s in after["diagnoses"]["cancel_aborts"]["samples"]} == {"log"}


def test_cancel_without_the_log_is_never_no(runs: dict[str, dict[str, Any]]) -> None:
    """The after build's run read again with its timings but no log or /metrics: the next request started at once,
    but its short reply cannot say the prefill stopped rather than ran on beside it. Never "no"; where it cannot
    tell, it says what would."""
    r = runs["dual-2080ti-after"]
    lines = [x for x in r["lines"] if x.get("scenario") != "calibration"]
    got = diagnose(r["summary"]["metrics"], lines, ServerEvidence()).to_json()["cancel_aborts"]
    assert got["samples"], got
    for s in got["samples"]:
        assert s["verdict"] in (YES, CANT), got
        if s["verdict"] == CANT:
            assert s["would_tell"] and "--server-log" in s["would_tell"], s


@pytest.mark.parametrize("profile", ["dual-2080ti-before", "dual-2080ti-after"])
def test_contract_summary_and_clean_run(runs: dict[str, dict[str, Any]], profile: str) -> None:
    r = runs[profile]
    s = r["summary"]
    assert (s["kind"], s["seed"], s["cycles"], s["errors"], s["wrong_answers"]) == ("stress", 42, 3, 0, 0)
    assert s["requests"] == 3 * 14 == len(r["lines"])
    for m in (
        "short_insert_ttft_s",
        "double_insert_ttft_s",
        "post_cancel_ttft_s",
        "concurrent_combined_tok_s",
        "long_prefill_s",
    ):
        assert set(s["metrics"][m]) >= {"p50", "p95", "max"} and s["metrics"][m]["n"] >= 3
    assert s["metrics"]["double_insert_ttft_s"]["n"] == 6
    assert s["options"]["time_scale"] == float(SCALE)
    # every line names its cycle and scenario, and every request reached the sim under its own id
    assert all(x["cycle"] in (1, 2, 3) and x["scenario"] for x in r["lines"])
    assert all(x["request_id"] in r["events"] for x in r["lines"])
    assert r["stdout"].strip().splitlines()[-1] == str(r["run"])


@pytest.mark.parametrize("profile", ["dual-2080ti-before", "dual-2080ti-after"])
def test_long_prompts_hit_the_token_target_and_are_unique(runs: dict[str, dict[str, Any]], profile: str) -> None:
    r = runs[profile]
    longs = [x for x in r["lines"] if x["role"] == "long"]
    counts = [r["events"][x["request_id"]]["prompt_tokens"] for x in longs]
    assert len(counts) == 12
    assert all(abs(c - LONG) <= 0.02 * LONG for c in counts), counts
    assert r["summary"]["long_prompt_tokens"]["max_error_vs_target"] <= 0.02
    manifest = json.loads((r["run"] / "manifest.json").read_text())
    assert manifest["tokenization"]["method"] == "messages"
    assert len({x["expected"] for x in longs}) == 12


def test_cancel_is_seen_by_the_server(runs: dict[str, dict[str, Any]]) -> None:
    for r in runs.values():
        cancelled = [x for x in r["lines"] if x["scenario"] == "cancel_then_short" and x["role"] == "long"]
        assert cancelled and all(r["events"][x["request_id"]]["cancelled"] for x in cancelled)
        assert all(x["outcome"] == "cancelled_as_planned" for x in cancelled)


def test_gpu_memory_sampled_from_the_stand_in(runs: dict[str, dict[str, Any]]) -> None:
    gpu = runs["dual-2080ti-before"]["summary"]["gpu_memory"]
    assert set(gpu) == {"0", "1"}
    assert gpu["1"]["peak_mib"] > gpu["0"]["peak_mib"] >= 1000
    assert len(gpu["0"]["cycle_peak_mib"]) == 3
    assert gpu["0"]["slope_mib_per_cycle"] > 0


def test_client_self_check_is_recorded(runs: dict[str, dict[str, Any]]) -> None:
    for r in runs.values():
        c = r["summary"]["client"]
        assert c["send_lateness_s"]["n"] == len(r["lines"])
        assert c["loop_lag_max_s"] is not None and isinstance(c["distorted"], bool)
        assert all(x["t_sent"] >= x["t_planned"] - 1e-3 for x in r["lines"])


def test_each_planned_cancel_records_how_late_it_went_out(runs: dict[str, dict[str, Any]]) -> None:
    """A cancel's plan and its lateness against it are on its line and in the summary; on an unloaded sim the
    stream closes within a generous 0.5 s of its plan (a timer may fire a few ms early: uvloop's are ms-grained)."""
    for r in runs.values():
        cancelled = [x for x in r["lines"] if x.get("cancel_sent")]
        assert cancelled and all(x["t_cancel_planned"] >= x["t_sent"] - 0.01 for x in cancelled)
        late = [x["cancel_lateness_s"] for x in cancelled]
        assert all(-0.01 <= v < 0.5 for v in late), late
        assert all(abs(x["t_done"] - x["t_cancel_planned"] - x["cancel_lateness_s"]) < 1e-9 for x in cancelled)
        assert r["summary"]["client"]["cancel_lateness_s"]["n"] == len(cancelled)
