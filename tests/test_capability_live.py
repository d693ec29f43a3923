"""`evalkit capability` against `evalkit sim` over real HTTP: 140/140 at accuracy 1.0 with thinking off and low
(reasoning in its own field and inline), agreement with the sim's `intended_correct` at 0.9, and resume."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

EVALKIT = [sys.executable, "-m", "evalkit"]


def _run(sim, tmp_path: Path, name: str, *flags: str) -> tuple[Path, subprocess.CompletedProcess]:
    proc = subprocess.run(
        [
            *EVALKIT,
            "capability",
            "--base-url",
            sim.base_url,
            "--out",
            str(tmp_path),
            "--name",
            name,
            "--concurrency",
            "4",
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    run = Path(proc.stdout.strip().splitlines()[-1])
    assert run == tmp_path / name
    return run, proc


def _graded(run: Path) -> list[dict]:
    return [json.loads(ln) for ln in (run / "graded.jsonl").read_text().splitlines()]


def _events(sim) -> dict[str, dict]:
    with urllib.request.urlopen(sim.root_url + "/sim/events", timeout=10) as r:
        return {e["request_id"]: e for e in json.load(r)["events"]}


@pytest.mark.parametrize("thinking, fmt", [("off", "reasoning_content"), ("low", "think_tags")])
def test_full_set_scores_140_at_accuracy_1(sim, tmp_path: Path, thinking: str, fmt: str) -> None:
    s = sim("--port", "0", "--time-scale", "1000", "--accuracy", "1.0", "--reasoning-format", fmt)
    run, proc = _run(s, tmp_path, f"full-{thinking}", "--thinking", thinking)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["kind"] == "capability" and summary["thinking"] == thinking
    assert summary["total"]["correct"] == 140 and summary["total"]["total"] == 140
    assert {k: v["total"] for k, v in summary["scores"].items()} == {
        "gsm8k": 50,
        "math500": 30,
        "musr": 20,
        "humanevalplus": 40,
    }
    graded = _graded(run)
    events = _events(s)
    assert all(events[g["request_id"]]["question_id"] == g["id"] for g in graded)
    assert all(g["thinking"] == (thinking != "off") for g in graded)
    assert all(events[g["request_id"]]["thinking"] == (thinking != "off") for g in graded)
    if thinking != "off":
        assert all(g["reasoning"] and g["reasoning_tokens"] > 0 for g in graded)
        assert all("<think>" not in g["content"] and "</think>" not in g["content"] for g in graded)
    assert summary["thinking_warning"] is None
    man = json.loads((run / "manifest.json").read_text())
    assert man["question_set"]["name"] == "capability-140-v1" and len(man["question_set"]["sha256"]) == 64
    reqs = [json.loads(ln) for ln in (run / "requests.jsonl").read_text().splitlines()]
    assert {r["request_id"] for r in reqs} == {g["request_id"] for g in graded}
    assert "humanevalplus" in proc.stdout and "140" in proc.stdout
    assert all(g["prompt"] and g["row_hash"] for g in graded)


def test_verdict_agrees_with_sim_at_accuracy_09(sim, tmp_path: Path) -> None:
    s = sim(
        "--port",
        "0",
        "--time-scale",
        "1000",
        "--accuracy",
        "0.9",
        "--seed",
        "7",
        "--reasoning-format",
        "think_close_only",
    )
    run, _ = _run(s, tmp_path, "acc09", "--thinking", "low")
    graded = _graded(run)
    events = _events(s)
    assert len(graded) == 140
    disagree = [
        (g["id"], g["outcome"], g["why"][:200])
        for g in graded
        if events[g["request_id"]]["intended_correct"] != g["correct"]
    ]
    assert not disagree
    assert 0 < sum(not g["correct"] for g in graded) < 40


def test_thinking_ignored_is_warned_and_resume_continues(sim, tmp_path: Path) -> None:
    # Asking thinking off of a server whose template ignores the switch: reasoning still shows up.
    s = sim("--port", "0", "--time-scale", "1000", "--default-thinking", "on")
    cfg = tmp_path / "evalkit.toml"
    cfg.write_text(f'[servers.deaf]\nbase_url = "{s.base_url}"\nthinking = "none"\n')

    def capability(limit: int) -> subprocess.CompletedProcess[str]:
        argv = ["capability", "--config", str(cfg), "--server", "deaf", "--thinking", "off", "--datasets"]
        argv += ["gsm8k,musr", "--limit", str(limit), "--out", str(tmp_path), "--name", "r"]
        return subprocess.run([*EVALKIT, *argv], capture_output=True, text=True, timeout=300)

    proc = capability(3)
    assert proc.returncode == 0, proc.stderr
    run = tmp_path / "r"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["total"]["total"] == 6 and "asked off" in summary["thinking_warning"]
    # Resume with a larger limit: only the new questions are asked.
    proc = capability(5)
    assert proc.returncode == 0, proc.stderr
    graded = _graded(run)
    assert len(graded) == 10 and len({g["id"] for g in graded}) == 10
    assert json.loads((run / "summary.json").read_text())["total"]["total"] == 10
