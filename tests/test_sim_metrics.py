"""The sim's `/metrics` against its own truth, and evalkit's capture of it end to end (bench, stress, log flags)."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from evalkit.evidence.server_metrics import parse_metrics
from evalkit.runs.rundir import read_jsonl
from runfixtures import bench_args

BEFORE = (0.872, 0.744, 0.609)  # the write-up's draft acceptance per position before d4b04876
AFTER = (0.839, 0.612, 0.435)  # and after


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evalkit", *args], capture_output=True, text=True, timeout=120)


def _summary(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())


def _bench_code(sim, tmp_path: Path, name: str, accept: tuple[float, ...]) -> dict:
    s = sim("--time-scale", "10", "--spec-accept", ",".join(map(str, accept)))
    assert tuple(s.config()["spec_accept"]) == accept  # the truth the bench is checked against
    prompts = tmp_path / "code.toml"
    prompts.write_text('[[prompt]]\nname = "code"\ntext = "Write a long commented Python module."\n')
    p = _cli(
        *bench_args(s.base_url, tmp_path, name),
        "--runs",
        "2",
        "--max-tokens",
        "1024",
        "--prompts",
        str(prompts),
    )
    assert p.returncode == 0, p.stderr
    return _summary(tmp_path / name)


def test_bench_reads_per_position_acceptance_and_speed_follows(sim, tmp_path: Path) -> None:
    before = _bench_code(sim, tmp_path, "before", BEFORE)
    after = _bench_code(sim, tmp_path, "after", AFTER)
    for summary, truth in ((before, BEFORE), (after, AFTER)):
        spec = summary["spec_decode"]["per_label"]["code"]
        assert spec["windows"] == 2 and spec["drafts"] > 500
        assert spec["per_position"] == pytest.approx(list(truth), abs=0.01)  # within 1 point of the sim's truth
        assert spec["mean_acceptance_length"] == pytest.approx(1 + sum(truth), abs=0.03)
    # A verify pass takes as long either way, so decode tok/s moves with 1 + the accepted tokens per pass.
    ratio = after["prompts"]["code"]["tok_s"] / before["prompts"]["code"]["tok_s"]
    assert ratio == pytest.approx((1 + sum(AFTER)) / (1 + sum(BEFORE)), rel=0.06)


def test_llamacpp_spec_counters_and_per_request_drafts_equal_the_servers_deltas(sim, tmp_path: Path) -> None:
    # llama.cpp names (llamacpp:spec_decode_*, no labels) and timings.draft_n / draft_n_accepted per request.
    s = sim("--time-scale", "10", "--spec-accept", "0.8,0.5", "--spec-metric-names", "llamacpp")
    prompts = tmp_path / "code.toml"
    prompts.write_text('[[prompt]]\nname = "code"\ntext = "Write a long commented Python module."\n')
    p = _cli(
        *bench_args(s.base_url, tmp_path, "lc"),
        "--runs",
        "2",
        "--max-tokens",
        "400",
        "--prompts",
        str(prompts),
        "--concurrency",
        "1",
    )
    assert p.returncode == 0, p.stderr
    run = tmp_path / "lc"
    summary = _summary(run)
    spec = summary["spec_decode"]["per_label"]["code"]
    assert spec["server"] == "llama.cpp" and "llamacpp:spec_decode_" in spec["source"]
    # The figures are the server's own counter deltas over the prompt's windows, position by position.
    scrapes = [ln for ln in read_jsonl(run / "metrics.jsonl") if ln["ok"] and ln["label"].endswith(":code")]
    assert [ln["label"] for ln in scrapes] == ["before:code", "after:code"] * 2
    name = "llamacpp:spec_decode_num_accepted_tokens_per_pos_total"
    for i, acc in enumerate(spec["per_position_accepted"]):
        key = f'{name}{{position="{i}"}}'
        assert acc == sum(b["series"][key] - a["series"][key] for a, b in zip(scrapes[::2], scrapes[1::2]))
    assert spec["per_position"] == pytest.approx([0.8, 0.5], abs=0.03)
    # Per request: the sums of timings.draft_n / draft_n_accepted over the prompt's runs are the same drafts.
    timed = summary["spec_decode"]["timings_per_label"]["code"]
    reqs = [r for r in read_jsonl(run / "requests.jsonl") if r.get("phase") == "single"]
    assert timed["draft_tokens"] == sum(r["server_timings"]["draft_n"] for r in reqs) == spec["draft_tokens"]
    assert timed["accepted_tokens"] == spec["accepted_tokens"]
    assert "draft acceptance per position" in p.stdout and "llamacpp:spec_decode_" in p.stdout  # printed, source named


def test_token_counters_equal_evalkit_counts(sim, tmp_path: Path) -> None:
    s = sim("--time-scale", "20")
    p = _cli(
        *bench_args(s.base_url, tmp_path, "b"),
        "--runs",
        "1",
        "--max-tokens",
        "40",
        "--concurrency",
        "2",
    )
    assert p.returncode == 0, p.stderr
    run = tmp_path / "b"
    reqs = read_jsonl(run / "requests.jsonl")
    counters = _summary(run)["server_metrics"]["counters"]
    key = '{engine="0",model_name="evalkit-sim"}'
    assert counters[f"vllm:prompt_tokens_total{key}"] == sum(r["prompt_tokens"] for r in reqs)
    assert counters[f"vllm:generation_tokens_total{key}"] == sum(r["completion_tokens"] for r in reqs)
    assert counters[f"vllm:request_queue_time_seconds_count{key}"] == len(reqs)
    # Each bench window counts just its own request.
    code = _summary(run)["server_metrics"]["per_label"]["code"]
    assert code[f"vllm:generation_tokens_total{key}"] == 40


def test_metrics_switch_off_is_a_404(sim) -> None:
    on, off = sim("--time-scale", "20"), sim("--time-scale", "20", "--no-metrics")
    with urllib.request.urlopen(on.root_url + "/metrics", timeout=10) as r:
        assert 'vllm:num_requests_running{engine="0",model_name="evalkit-sim"}' in parse_metrics(r.read().decode())
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(off.root_url + "/metrics", timeout=10)
    assert e.value.code == 404


@pytest.mark.parametrize("bad", ["0.5,0.7", "1.2", "x"])
def test_spec_accept_rejects_bad_values(bad: str) -> None:
    p = _cli("sim", "--spec-accept", bad, "--port", "0")
    assert p.returncode == 2 and "--spec-accept" in p.stderr


def test_stress_flags_the_clamp_line_and_samples_metrics(sim, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    s = sim("--time-scale", "20", "--max-batch", "2", "--clamp-batch", "--server-log-file", str(log))
    p = _cli(
        "stress",
        "--base-url",
        s.base_url,
        "--out",
        str(tmp_path),
        "--name",
        "s",
        "--cycles",
        "1",
        "--time-scale",
        "20",
        "--long-tokens",
        "3000",
        "--no-progress",
        "--server-log",
        str(log),
        "--metrics-interval",
        "0.05",
    )
    assert p.returncode == 0, p.stderr
    summary = _summary(tmp_path / "s")
    flagged = summary["server_log"]["flagged_lines"]
    assert any(
        f["line"] == "explicit-token safety max_batch limited 2 -> 1" and "batch_clamp" in f["flags"] for f in flagged
    )
    assert any("context_per_request" in f["flags"] for f in flagged)
    labels = [ln["label"] for ln in read_jsonl(tmp_path / "s" / "metrics.jsonl")]
    assert labels[0] == "before" and labels[-1] == "after" and labels.count("sample") >= 3
    running = summary["server_metrics"]["gauges"]['vllm:num_requests_running{engine="0",model_name="evalkit-sim"}']
    assert running["max"] == 1  # the clamp: never two at once, as the gauge shows
