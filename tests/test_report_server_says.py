"""The report's "what the server says" section, rendered from run directories' manifests and summaries."""

from __future__ import annotations

import json
from pathlib import Path

from evalkit.cli import main
from runfixtures import bench_run


def _add_evidence(run: Path, model: str, per_pos: list[float], drafts: int, log_line: str, flag: str) -> None:
    man = json.loads((run / "manifest.json").read_text())
    man.update(
        model=model,
        server_identity={
            "server_type": "llama.cpp",
            "props": {"total_slots": 2, "n_ctx": 8192, "build_info": "b1-abc"},
        },
    )
    (run / "manifest.json").write_text(json.dumps(man))
    s = json.loads((run / "summary.json").read_text())
    s["spec_decode"] = {
        "run": None,
        "per_label": {"code": {"drafts": drafts, "per_position": per_pos, "mean_acceptance_length": 1 + sum(per_pos)}},
    }
    s["server_metrics"] = {"available": True, "counters": {"vllm:num_preemptions_total": 3.0}, "gauges": {}}
    s["server_log"] = {
        "path": "server.log",
        "lines": 5,
        "flagged": 1,
        "flagged_lines": [{"t": 1.0, "line": log_line, "flags": [flag], "earlier": True}],
    }
    (run / "summary.json").write_text(json.dumps(s))


def test_section_shows_acceptance_marks_identity_and_log(tmp_path: Path) -> None:
    before = bench_run(tmp_path / "before", "before", {"code": 100.0})
    after = bench_run(tmp_path / "after", "after", {"code": 85.0})
    # FastLLM's own line (H200 run): its time stamp comes first and is not the context length.
    _add_evidence(
        before,
        "m",
        [0.872, 0.744, 0.609],
        2000,
        "2026-12-01 14:47:03,455 4958 server.py[line:326] INFO: Model context window: 262144 tokens per "
        "session (model=262144, shared KV cache=None, configured limit=None)",
        "context_per_request",
    )
    _add_evidence(
        after, "m2", [0.870, 0.612, 0.435], 2000, "explicit-token safety max_batch limited 2 -> 1", "batch_clamp"
    )
    out = tmp_path / "r.md"
    assert main(["report", str(before), str(after), "-o", str(out)]) == 0
    md = out.read_text()
    section = md[md.index("## What the server says") :]
    assert "| code position 0 | 87.2% | 87.0% (-0.2 pt) ≈ |" in section  # inside binomial noise of 2000 drafts
    assert "| code position 2 | 60.9% | 43.5% (-17.4 pt) ▼ |" in section
    assert "the runs served different models (m, m2)" in section
    assert "| slots | 2 | 2 |" in section and "| preemptions | 3 | 3 |" in section
    assert "| context per request (log) | 262144 | – |" in section
    assert (
        "`explicit-token safety max_batch limited 2 -> 1` — batch_clamp (in the log before the run started)" in section
    )
