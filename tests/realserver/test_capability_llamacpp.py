"""`evalkit capability` on a small subset against a real llama-server, thinking off.

SmolLM2-135M gets most answers wrong; what is checked is that every answer was read and graded (no `error`
outcome) and that the stored texts are what the model generated: asked again alone at temperature 0, the server
gives the same text back. That holds only with the prompt cache off (the example profile `llamacpp-smollm2` sets
`cache_prompt = false`): a prompt whose prefix came from the cache is computed in other batch shapes, and greedy
decoding then drifts after a few dozen characters.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from realserver_support import REPO, get_json, read_jsonl, run_dir_from, run_evalkit

pytestmark = pytest.mark.realserver

LIMIT = 5  # per dataset: 5 GSM8K + 5 HumanEval+ questions
MAX_TOKENS = 384
REASKED = 3


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def test_capability_subset_grades_every_answer_and_keeps_the_models_text(llama_server, tmp_path: Path) -> None:
    """10 questions, concurrency 1: all graded, none `error`; re-asked answers match the stored ones."""
    srv = llama_server(parallel=2, ctx=8192)
    proc = run_evalkit(
        [
            "capability",
            "--config",
            str(REPO / "examples" / "evalkit.toml"),
            "--server",
            "llamacpp-smollm2",
            "--base-url",
            srv.base_url,
            "--thinking",
            "off",
            "--datasets",
            "gsm8k,humanevalplus",
            "--limit",
            str(LIMIT),
            "--concurrency",
            "1",
            "--max-tokens",
            str(MAX_TOKENS),
            "--out",
            str(tmp_path),
            "--name",
            "capability-llamacpp",
        ],
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    run = run_dir_from(proc)
    graded = read_jsonl(run / "graded.jsonl")
    requests = {x["request_id"]: x for x in read_jsonl(run / "requests.jsonl")}
    summary = json.loads((run / "summary.json").read_text())
    manifest = json.loads((run / "manifest.json").read_text())

    print(f"\n[realserver] capability scores: {summary['scores']} total {summary['total']}")
    for line in graded:
        print(
            f"[realserver]   {line['id']:26s} {line['outcome']:9s} extracted {str(line['extracted'])[:30]!r} "
            f"answer {line['content'][:70]!r}"
        )
    assert len(graded) == 2 * LIMIT
    assert {ln["dataset"] for ln in graded} == {"gsm8k", "humanevalplus"}
    assert all(ln["outcome"] in ("correct", "wrong", "unparsed", "truncated") for ln in graded), [
        (ln["id"], ln["outcome"], ln["why"]) for ln in graded
    ]
    assert summary["total"]["total"] == 2 * LIMIT

    for line in graded:
        rec = requests[line["request_id"]]
        assert rec["status"] == "ok" and rec["content"] == line["content"]
        assert rec["usage_source"] == "server" and rec["server_timings"]["predicted_n"] == rec["completion_tokens"]
        assert line["content"].strip()

    body = manifest.get("request_extra_body") or {}
    assert body.get("cache_prompt") is False, body  # from the example profile
    for line in graded[:REASKED]:
        again = get_json(
            f"{srv.base_url}/chat/completions",
            {
                **body,
                "messages": [{"role": "user", "content": line["prompt"]}],
                "max_tokens": MAX_TOKENS,
                "temperature": 0.0,
                "stream": False,
            },
            timeout=120,
        )
        text = again["choices"][0]["message"]["content"]
        same = _common_prefix(text, line["content"])
        print(
            f"[realserver]   re-asked {line['id']}: identical={text == line['content']}, "
            f"first {same} of {len(line['content'])} characters agree"
        )
        assert text == line["content"], (same, line["content"][:120], text[:120])
