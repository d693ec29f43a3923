"""Server evidence: `/metrics` parsing and recording, `--server-log` following, over real files and real HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evalkit.clock import Clock
from evalkit.evidence.server_log import LogFollower, LogPatterns
from evalkit.evidence.server_metrics import (
    MetricsError,
    counter_deltas,
    gauge_ranges,
    metrics_url,
    parse_metrics,
    series_key,
    window_pairs,
)
from evalkit.runs.rundir import read_jsonl
from runfixtures import bench_args

VLLM_TEXT = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m",engine="0"} 2.0
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{model_name="m"} 120.0
# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_bucket{le="0.1",model_name="m"} 1.0
vllm:request_queue_time_seconds_bucket{le="+Inf",model_name="m"} 2.0
vllm:request_queue_time_seconds_sum{model_name="m"} 0.35
vllm:request_queue_time_seconds_count{model_name="m"} 2.0
llamacpp:tokens_predicted_total 7
"""


def test_parse_flattens_to_sorted_label_series() -> None:
    s = parse_metrics(VLLM_TEXT)
    assert s['vllm:num_requests_running{engine="0",model_name="m"}'] == 2.0
    assert s['vllm:prompt_tokens_total{model_name="m"}'] == 120.0
    assert s['vllm:request_queue_time_seconds_bucket{le="+Inf",model_name="m"}'] == 2.0
    assert s['vllm:request_queue_time_seconds_count{model_name="m"}'] == 2.0
    assert s["llamacpp:tokens_predicted_total"] == 7.0


@pytest.mark.parametrize("text", ["", "<html><body>404 Not Found</body></html>", "garbage text here {{{"])
def test_parse_rejects_what_is_not_prometheus(text: str) -> None:
    with pytest.raises(MetricsError):
        parse_metrics(text)


@pytest.mark.parametrize(
    "base, url",
    [
        ("http://h:8000/v1", "http://h:8000/metrics"),
        ("http://h:8000/v1/", "http://h:8000/metrics"),
        ("http://h:8000", "http://h:8000/metrics"),
    ],
)
def test_metrics_url_is_at_the_server_root(base: str, url: str) -> None:
    assert metrics_url(base) == url


def test_series_key_sorts_labels() -> None:
    assert series_key("a", {"z": "1", "b": "2"}) == 'a{b="2",z="1"}'
    assert series_key("a", {}) == "a"


def test_windows_pair_before_with_next_after_and_sum_counters() -> None:
    def line(label: str, t: float, c: float, g: float, ok: bool = True) -> dict:
        return {
            "t": t,
            "label": label,
            "ok": ok,
            "error": None,
            "series": {"x_total": c, "running": g, 'h_bucket{le="1"}': c} if ok else {},
        }

    lines = [
        line("before:code", 0, 10, 0),
        line("after:code", 1, 15, 1),
        line("before:math", 2, 15, 0),
        line("after:math", 3, 40, 3),
        line("before:code", 4, 40, 0),
        line("sample", 4.5, 41, 5),
        line("after:code", 5, 42, 1),
        line("before:code", 6, 42, 0),
        line("after:code", 7, 0, 0, ok=False),
    ]
    pairs = window_pairs(lines, "before:code", "after:code")
    assert len(pairs) == 2  # the failed after leaves its window out
    assert counter_deltas(pairs) == {"x_total": 7.0}
    assert counter_deltas(pairs, buckets=True)['h_bucket{le="1"}'] == 7.0
    assert gauge_ranges(lines, 4, 5) == {"running": {"min": 0, "max": 5, "last": 1}}


def _follow(path: Path, lines: list[dict], warnings: list[str]) -> LogFollower:
    f = LogFollower(
        path,
        Clock(),
        LogPatterns.from_profile({"decode_alive": r"Decode alive = \d+", "cancel": ""}),
        lambda _name, rec: lines.append(rec),
        warnings.append,
        poll_s=0.02,
    )
    f.start()
    return f


def _wait_for(cond, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not cond() and time.monotonic() < end:
        time.sleep(0.02)


def test_log_follower_starts_at_the_end_and_flags(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("old line from an earlier run: CUDA error\n")
    got: list[dict] = []
    warnings: list[str] = []
    f = _follow(log, got, warnings)
    with open(log, "a") as fh:
        fh.write("explicit-token safety max_batch limited 2 -> 1\nDecode alive = 2\nstop: cancel task\n")
        fh.flush()
        _wait_for(lambda: len(got) >= 3)
        fh.write("torch.OutOfMemoryError: CUDA out of memory. half a li")
        fh.flush()
    f.stop()
    assert warnings == []
    earlier = got.pop(0)  # of the lines already there, only flagged ones are kept, marked as earlier
    assert earlier["earlier"] is True and earlier["flags"] == ["cuda_error"]
    assert [g["line"] for g in got] == [
        "explicit-token safety max_batch limited 2 -> 1",
        "Decode alive = 2",
        "stop: cancel task",
        "torch.OutOfMemoryError: CUDA out of memory. half a li",
    ]
    assert got[0]["flags"] == ["batch_clamp"]
    assert got[1]["flags"] == ["decode_alive"]
    assert got[2]["flags"] == []  # the profile switched "cancel" off
    assert "out_of_memory" in got[3]["flags"]
    assert all(isinstance(g["t"], float) for g in got)


def test_log_follower_waits_for_a_file_that_does_not_exist_yet(tmp_path: Path) -> None:
    log = tmp_path / "later.log"
    got: list[dict] = []
    warnings: list[str] = []
    f = _follow(log, got, warnings)
    time.sleep(0.1)
    written = f.clock.now()
    log.write_text("Model context window: 222080 tokens per session\n")
    _wait_for(lambda: len(got) >= 1)
    f.stop()
    assert len(warnings) == 1 and "does not exist yet" in warnings[0]
    assert got == [
        {
            "t": got[0]["t"],
            "t_after": got[0]["t_after"],
            "line": "Model context window: 222080 tokens per session",
            "flags": ["context_per_request"],
        }
    ]
    # the line was written between the read before (which did not see it) and the read that did
    assert got[0]["t_after"] <= written <= got[0]["t"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evalkit", *args], capture_output=True, text=True, timeout=120)


def test_bench_without_metrics_warns_once_and_goes_on(sim, tmp_path: Path) -> None:
    s = sim("--time-scale", "20", "--no-metrics")
    log = tmp_path / "missing.log"
    p = _cli(
        *bench_args(s.base_url, tmp_path, "b"),
        "--runs",
        "1",
        "--max-tokens",
        "16",
        "--concurrency",
        "1",
        "--server-log",
        str(log),
    )
    assert p.returncode == 0, p.stderr
    assert p.stderr.count("server metrics unavailable") == 1
    assert p.stderr.count("does not exist yet") == 1
    run = tmp_path / "b"
    lines = read_jsonl(run / "metrics.jsonl")
    # before, before/after each of 3 prompts, after: every one recorded, none usable.
    assert [ln["label"] for ln in lines] == [
        "before",
        "before:code",
        "after:code",
        "before:math",
        "after:math",
        "before:prose",
        "after:prose",
        "after",
    ]
    assert all(not ln["ok"] and "404" in ln["error"] for ln in lines)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["server_metrics"]["available"] is False and summary["server_metrics"]["failed"] == 8
    assert summary["server_log"]["lines"] == 0
    assert summary["prompts"]["code"]["tok_s"] > 0


def test_a_log_line_read_late_still_counts_inside_the_window_it_was_written_in() -> None:
    from evalkit.evidence.server_evidence import LogEvent, ServerEvidence

    # Read at 10.20 s; the follower's read before (which did not see it yet) ran at 10.00 s.
    late = LogEvent(10.20, "cache", line="prompt cache update took 5.00 ms", t_after=10.00)
    ev = ServerEvidence(log=(late,))
    assert ev.events("cache", 9.9, 10.05) == [late]  # may have been written by 10.05: counted
    assert ev.events("cache", 10.25, 11.0) == []  # read before the window opened
    assert ServerEvidence(log=(LogEvent(10.20, "cache"),)).events("cache", 9.9, 10.05) == []  # no t_after: as read
    assert ServerEvidence(log=(LogEvent(10.20, "cache", t_after=10.10),)).events("cache", 9.9, 10.05) == []
