"""`evalkit capability` on a few GSM8K questions against a real vLLM (the session's default-scheduler server),
thinking off. A 135M model gets most of them wrong: what is checked is that the run is complete and every answer
was read and graded, with the text and token counts vLLM sent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from realserver_support import read_jsonl, run_dir_from, run_evalkit

pytestmark = pytest.mark.realserver

LIMIT = 4
MAX_TOKENS = 192  # SmolLM2's GSM8K answers run 60-200 tokens; a cut one is graded `truncated`, still graded


def test_capability_subset_against_vllm_is_complete_and_graded(vllm_server: Any, tmp_path: Path) -> None:
    srv = vllm_server()
    proc = run_evalkit(
        [
            "capability",
            "--base-url",
            srv.base_url,
            "--thinking",
            "off",
            "--datasets",
            "gsm8k",
            "--limit",
            str(LIMIT),
            "--concurrency",
            "2",
            "--max-tokens",
            str(MAX_TOKENS),
            "--out",
            str(tmp_path),
            "--name",
            "capability-vllm",
        ],
        cwd=tmp_path,
        timeout_s=400,
    )
    assert proc.returncode == 0, proc.stderr
    run = run_dir_from(proc)
    graded = read_jsonl(run / "graded.jsonl")
    requests = {x["request_id"]: x for x in read_jsonl(run / "requests.jsonl")}
    summary = json.loads((run / "summary.json").read_text())
    print(f"\n[realserver] vLLM capability: scores {summary['scores']} total {summary['total']}")
    assert len(graded) == LIMIT and {ln["dataset"] for ln in graded} == {"gsm8k"}
    assert summary["total"]["total"] == LIMIT
    assert all(ln["outcome"] in ("correct", "wrong", "unparsed", "truncated") for ln in graded), [
        (ln["id"], ln["outcome"], ln.get("why")) for ln in graded
    ]
    for line in graded:
        rec = requests[line["request_id"]]
        assert rec["status"] == "ok" and rec["content"] == line["content"] and line["content"].strip()
        assert rec["usage_source"] == "server" and 0 < rec["completion_tokens"] <= MAX_TOKENS
