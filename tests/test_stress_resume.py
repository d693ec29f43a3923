"""`evalkit stress` resumes cycle by cycle: SIGKILL mid-cycle, a `--max-minutes` stop, a refused resume.

Against one `evalkit sim` at `--time-scale 20` with 3000-token long prompts (a cycle takes about a second), the
resumed runs are compared with an uninterrupted run of the same seed: same cycles, same requests per cycle, the
same number of samples behind every metric, and the cut cycle's lines ignored.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalkit.runs.rundir import read_jsonl
from evalkit.sim.launch import SimProcess, start_sim

SCALE = "20"
FLAGS = ("--cycles", "3", "--seed", "11", "--long-tokens", "3000", "--time-scale", SCALE, "--gen-tokens", "64")


def stress_cmd(base_url: str, out: Path, name: str, *flags: str) -> list[str]:
    return [
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


def summary_of(run: Path) -> dict[str, Any]:
    return json.loads((run / "summary.json").read_text())


def per_cycle(run: Path, summary: dict[str, Any]) -> Counter[int]:
    """Requests per cycle among the lines the summary says it counted."""
    chosen = {int(c): a for c, a in summary["cycle_attempts"].items()}
    return Counter(
        r["cycle"]
        for r in read_jsonl(run / "requests.jsonl")
        if r["cycle"] in chosen and r["attempt"] == chosen[r["cycle"]]
    )


def sample_counts(summary: dict[str, Any]) -> dict[str, int]:
    # Samples plus the requests that did not exercise their situation (an insert that came after a 3000-token
    # prefill had ended, as timing decides): together the same in every run of the seed.
    same = {"short_insert_done_s": "short_insert_ttft_s"}
    missed = summary.get("not_exercised") or {}
    return {m: d["n"] + (missed.get(same.get(m, m)) or {}).get("count", 0) for m, d in summary["metrics"].items()}


@pytest.fixture(scope="module")
def server() -> Iterator[SimProcess]:
    with start_sim(["--profile", "dual-2080ti-before", "--time-scale", SCALE]) as sim:
        yield sim


@pytest.fixture(scope="module")
def reference(server: SimProcess, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("reference")
    p = subprocess.run(stress_cmd(server.base_url, out, "whole", *FLAGS), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    run = out / "whole"
    cycles = read_jsonl(run / "cycles.jsonl")
    return {"run": run, "summary": summary_of(run), "cycle_s": max(c["t_end"] - c["t_start"] for c in cycles)}


def test_sigkill_mid_cycle_then_resume_counts_each_cycle_once(
    server: SimProcess, reference: dict[str, Any], tmp_path: Path
) -> None:
    cmd = stress_cmd(server.base_url, tmp_path, "killed", *FLAGS)
    run = tmp_path / "killed"
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 60
    # The first line of cycle 2 is its long_alone request: 13 of its 14 requests are still to come.
    while time.monotonic() < deadline and not any(r["cycle"] == 2 for r in read_jsonl(run / "requests.jsonl")):
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    cut = [r for r in read_jsonl(run / "requests.jsonl") if r["cycle"] == 2]
    assert [c["cycle"] for c in read_jsonl(run / "cycles.jsonl")] == [1], "the kill must land inside cycle 2"
    assert 1 <= len(cut) < 14 and not (run / "summary.json").exists()

    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip().splitlines()[-1] == str(run)
    s, ref = summary_of(run), reference["summary"]
    # each cycle completed once; 1 by the killed attempt, 2 and 3 by the resume
    assert [(c["cycle"], c["attempt"]) for c in read_jsonl(run / "cycles.jsonl")] == [(1, 0), (2, 1), (3, 1)]
    assert s["cycle_attempts"] == {"1": 0, "2": 1, "3": 1} and s["attempts"] == 2
    assert (s["cycles"], s["requests"], s["errors"], s["wrong_answers"]) == (3, ref["requests"], 0, 0)
    assert per_cycle(run, s) == per_cycle(reference["run"], ref) == Counter({1: 14, 2: 14, 3: 14})
    assert sample_counts(s) == sample_counts(ref)
    assert s["stopped"] == "completed" and s["partial"] is False and s["unfinished_cycle"] is None
    # the cut attempt's lines stay in the file, are ignored, and were not what the summary measured
    assert all(r["attempt"] == 0 for r in cut)
    assert s["ignored_lines"]["abandoned_attempts"] == len(cut)
    assert len(read_jsonl(run / "requests.jsonl")) == ref["requests"] + len(cut)
    # the re-run cycle sent the very prompts it was fitted with before the kill (reloaded, not refitted)
    prompts = read_jsonl(run / "long_prompts.jsonl")
    assert len(prompts) == len({(x["first_word"], x["code"]) for x in prompts}) == 12
    events = {e["request_id"]: e for e in server.events()}
    first = {x["expected"]: events[x["request_id"]]["prompt_tokens"] for x in cut if x["role"] == "long"}
    redo = {
        x["expected"]: events[x["request_id"]]["prompt_tokens"]
        for x in read_jsonl(run / "requests.jsonl")
        if x["cycle"] == 2 and x["attempt"] == 1 and x["role"] == "long"
    }
    assert first and all(redo[code] == n for code, n in first.items())
    manifest = json.loads((run / "manifest.json").read_text())
    assert len(manifest["resumes"]) == 1 and manifest["tokenization"]["attempt"] == 0 and manifest["finished"]


def test_max_minutes_stop_then_resume_completes(server: SimProcess, reference: dict[str, Any], tmp_path: Path) -> None:
    # Stop about half-way through cycle 2 (the timer also covers start-up, which only makes it earlier).
    minutes = f"{1.5 * reference['cycle_s'] / 60:.5f}"
    p = subprocess.run(
        stress_cmd(server.base_url, tmp_path, "limited", *FLAGS, "--max-minutes", minutes),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    run = tmp_path / "limited"
    s = summary_of(run)
    assert s["stopped"] == "max_minutes" and s["partial"] is True and s["cycles"] < 3
    assert s["requests"] == 14 * s["cycles"]  # completed cycles only; a cut cycle is reported apart
    cut = s["unfinished_cycle"]
    on_disk = len(read_jsonl(run / "requests.jsonl"))
    assert on_disk == s["requests"] + (cut["requests"] if cut else 0)
    if cut:
        assert cut["cycle"] == s["cycles"] + 1 and "not counted" in p.stdout

    p = subprocess.run(
        stress_cmd(server.base_url, tmp_path, "limited", *FLAGS), capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr[-2000:]
    s2, ref = summary_of(run), reference["summary"]
    assert (s2["stopped"], s2["partial"], s2["cycles"], s2["requests"]) == ("completed", False, 3, ref["requests"])
    assert sample_counts(s2) == sample_counts(ref)
    assert s2["ignored_lines"]["abandoned_attempts"] == (cut["requests"] if cut else 0)
    assert json.loads((run / "manifest.json").read_text())["stopped"] == "completed"


@pytest.mark.parametrize("changed", [("--seed", "12"), ("--long-tokens", "3100"), ("--shuffle",)])
def test_resume_with_other_schedule_options_exits_2_and_leaves_the_run_alone(
    server: SimProcess, reference: dict[str, Any], changed: tuple[str, ...]
) -> None:
    run = reference["run"]
    flags = list(FLAGS)
    if len(changed) == 2:
        flags[flags.index(changed[0]) + 1] = changed[1]
    else:
        flags.append(changed[0])
    before = {f.name: f.read_bytes() for f in run.iterdir()}
    p = subprocess.run(
        stress_cmd(server.base_url, run.parent, run.name, *flags), capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 2
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and changed[0] in err[0] and "Traceback" not in p.stderr, p.stderr
    assert p.stdout == ""
    assert {f.name: f.read_bytes() for f in run.iterdir()} == before
