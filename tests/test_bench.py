"""`evalkit bench` against `evalkit sim` over real HTTP: rates match the sim's configured engine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evalkit.cli import main
from evalkit.runs.rundir import read_jsonl

SHORT_QUESTION = {"name": "short", "prompt": "What is 2 + 3? Reply with only the number."}


def bench(sim_url: str, out: Path, *flags: str) -> tuple[int, str, dict | None]:
    """Run the real CLI in a subprocess; (exit code, stdout, summary or None)."""
    p = subprocess.run(
        [sys.executable, "-m", "evalkit", "bench", "--base-url", sim_url, "--out", str(out), *flags],
        capture_output=True,
        text=True,
        timeout=120,
    )
    run_dir = Path(p.stdout.strip().splitlines()[-1]) if p.stdout.strip() else None
    summary = json.loads((run_dir / "summary.json").read_text()) if run_dir and run_dir.is_dir() else None
    return p.returncode, p.stdout, summary


def test_decode_rate_matches_sim(sim, tmp_path: Path) -> None:
    s = sim("--decode-rate", "100", "--time-scale", "5")
    cfg = s.config()
    expected = cfg["decode_rate"] * cfg["time_scale"]
    code, out, summary = bench(
        s.base_url, tmp_path, "--runs", "3", "--max-tokens", "256", "--concurrency", "1", "--name", "b"
    )
    assert code == 0
    assert out.strip().splitlines()[-1] == str(tmp_path / "b")
    assert list(summary["prompts"]) == ["code", "math", "prose"]
    for name, p in summary["prompts"].items():
        assert len(p["runs"]) == 3
        assert p["tok_s"] == pytest.approx(expected, rel=0.03), (name, p["runs"])
        # The request rate carries the prefill and first-token wait, so it is lower than the decode rate.
        assert p["request_tok_s"] < p["tok_s"]
        assert p["completion_tokens"] == [256, 256, 256]
    assert summary["stopped_early"] == [] and summary["errors"] == 0
    assert summary["concurrent"] is None
    # Every request the client recorded is one the sim served, with ignore_eos honoured.
    events = {e["request_id"]: e for e in s.events()}
    lines = read_jsonl(tmp_path / "b" / "requests.jsonl")
    measured = [x for x in lines if x.get("bench_key")]
    assert (
        len(lines) == 10
        and len(measured) == 9
        and all(events[x["request_id"]]["completion_tokens"] == 256 for x in measured)
    )


def test_two_streams_on_after_profile(sim, tmp_path: Path) -> None:
    s = sim("--profile", "dual-2080ti-after", "--time-scale", "6")
    cfg = s.config()
    combined = cfg["batch_decode_rate"] * cfg["time_scale"]
    single = cfg["decode_rate"] * cfg["time_scale"]
    prompts = tmp_path / "code.toml"
    prompts.write_text('[[prompt]]\nname = "code"\ntext = "Write a long commented Python module."\n')
    code, _, summary = bench(
        s.base_url, tmp_path, "--runs", "3", "--max-tokens", "384", "--concurrency", "2", "--prompts", str(prompts)
    )
    assert code == 0
    c = summary["concurrent"]
    assert c["streams"] == 2 and len(c["runs"]) == 3
    assert c["combined_tok_s"] == pytest.approx(combined, rel=0.05), c["runs"]
    for per in c["per_stream_tok_s"]:
        assert per == pytest.approx(combined / 2, rel=0.05)
    assert summary["prompts"]["code"]["tok_s"] == pytest.approx(single, rel=0.03)


def test_own_prompts_early_stop_and_resume(sim, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = sim("--decode-rate", "100", "--time-scale", "20")
    prompts = tmp_path / "mine.jsonl"
    prompts.write_text(json.dumps(SHORT_QUESTION) + "\n")
    flags = ("--prompts", str(prompts), "--runs", "2", "--max-tokens", "64", "--name", "own", "--no-ignore-eos")
    flags += ("--concurrency", "1")
    assert main(["bench", "--base-url", s.base_url, "--out", str(tmp_path), *flags]) == 0
    summary = json.loads((tmp_path / "own" / "summary.json").read_text())
    assert list(summary["prompts"]) == ["short"]
    # Without ignore_eos the sim stops after the answer: each run is reported as stopped early.
    assert len(summary["stopped_early"]) == 2
    assert all(e["completion_tokens"] < 64 and e["finish_reason"] == "stop" for e in summary["stopped_early"])
    s.reset()
    assert main(["bench", "--base-url", s.base_url, "--out", str(tmp_path), *flags]) == 0
    # complete: started again it says so, and not even a warm-up is sent (only the preflight's probe)
    assert "is finished (exit 0)" in capsys.readouterr().err
    assert [e for e in s.events() if not e["request_id"].startswith("preflight-")] == []
    again = json.loads((tmp_path / "own" / "summary.json").read_text())
    assert again["prompts"] == summary["prompts"]


def test_unreachable_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = "http://127.0.0.1:9/v1"
    assert main(["bench", "--base-url", url, "--out", str(tmp_path)]) == 2
    log = tmp_path / "log.jsonl"
    code = main(
        [
            "bench",
            "--base-url",
            url,
            "--out",
            str(tmp_path),
            "--bisect-good-at-least",
            "96",
            "--bisect-bad-at-most",
            "89",
            "--bisect-log",
            str(log),
            "--bisect-commit",
            "abc123",
        ]
    )
    assert code == 125
    (step,) = read_jsonl(log)
    assert step["verdict"] == "skip" and step["commit"] == "abc123" and step["tok_s"] is None


@pytest.mark.parametrize("good,bad,expected", [(150, 120, 0), (450, 400, 1), (230, 170, 125)])
def test_bisect_exit_codes(sim, tmp_path: Path, good: int, bad: int, expected: int) -> None:
    # decode 100 x time-scale 2 = 200 tok/s: above 150 good, below 400 bad, between 170 and 230 skip.
    s = sim("--decode-rate", "100", "--time-scale", "2")
    log = tmp_path / "log.jsonl"
    code = main(
        [
            "bench",
            "--base-url",
            s.base_url,
            "--out",
            str(tmp_path),
            "--runs",
            "1",
            "--max-tokens",
            "48",
            "--bisect-good-at-least",
            str(good),
            "--bisect-bad-at-most",
            str(bad),
            "--metric",
            "code",
            "--bisect-log",
            str(log),
        ]
    )
    assert code == expected
    (step,) = read_jsonl(log)
    assert step["verdict"] == {0: "good", 1: "bad", 125: "skip"}[expected]
    assert step["tok_s"] == pytest.approx(200, rel=0.05)
    events = [e for e in s.events() if not e["request_id"].startswith("preflight-")]  # warm-up and judged prompt
    assert len(events) == 2 and events[0]["prompt_tokens"] == events[1]["prompt_tokens"]


def test_bisect_usage_errors_exit_2(tmp_path: Path) -> None:
    base = ["bench", "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path)]
    assert main([*base, "--bisect-good-at-least", "90"]) == 2
    assert main([*base, "--bisect-good-at-least", "80", "--bisect-bad-at-most", "90"]) == 2
    assert main([*base, "--bisect-good-at-least", "96", "--bisect-bad-at-most", "89", "--metric", "nope"]) == 2
