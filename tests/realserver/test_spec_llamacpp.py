"""Speculative decoding against a real llama-server: SmolLM2 drafting for itself (`-md`, `--spec-type draft-simple`,
`--spec-draft-n-max`; llama.cpp 11434 infers a type only for MTP/dflash drafts, so a plain `-md` alone never drafts).

evalkit's acceptance per draft position must be the server's own `llamacpp:spec_decode_*` counter deltas, and its
per-request `timings.draft_n` / `draft_n_accepted` must sum to the same drafts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from realserver_support import read_jsonl, run_dir_from, run_evalkit

pytestmark = pytest.mark.realserver

DRAFT_MAX = 3


def test_self_draft_acceptance_is_the_servers_counters(llama_server, provisioned, tmp_path: Path) -> None:
    srv = llama_server(
        parallel=1,
        ctx=4096,
        extra_args=("-md", str(provisioned.model), "--spec-type", "draft-simple", "--spec-draft-n-max", str(DRAFT_MAX)),
    )
    prompts = tmp_path / "code.toml"
    prompts.write_text('[[prompt]]\nname = "code"\ntext = "Write a Python function that sorts a list."\n')
    proc = run_evalkit(
        [
            "bench",
            "--base-url",
            srv.base_url,
            "--runs",
            "2",
            "--max-tokens",
            "96",
            "--concurrency",
            "1",
            "--prompts",
            str(prompts),
            "--out",
            str(tmp_path),
            "--name",
            "spec",
        ],
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    run = run_dir_from(proc)
    summary = json.loads((run / "summary.json").read_text())
    spec = summary["spec_decode"]["per_label"]["code"]
    assert spec["server"] == "llama.cpp", spec
    scrapes = [ln for ln in read_jsonl(run / "metrics.jsonl") if ln["ok"] and ln["label"].endswith(":code")]
    pairs = list(zip(scrapes[::2], scrapes[1::2]))

    def delta(key: str) -> float:
        return sum(b["series"].get(key, 0.0) - a["series"].get(key, 0.0) for a, b in pairs)

    name = "llamacpp:spec_decode_num_accepted_tokens_per_pos_total"
    want = [delta(f'{name}{{position="{i}"}}') for i in range(len(spec["per_position_accepted"]))]
    print(
        f"\n[realserver] self-draft (n_max {DRAFT_MAX}): per position {[round(x, 3) for x in spec['per_position']]}, "
        f"accepted {spec['per_position_accepted']} (server deltas {want}), rate {spec['acceptance_rate']:.3f}, "
        f"mean length {spec['mean_acceptance_length']:.2f}"
    )
    assert spec["per_position_accepted"] == want and len(want) >= 1
    assert spec["drafts"] == delta("llamacpp:spec_decode_num_drafts_total")
    assert spec["draft_tokens"] == delta("llamacpp:spec_decode_num_draft_tokens_total")
    timed = summary["spec_decode"]["timings_per_label"]["code"]
    assert timed["draft_tokens"] == spec["draft_tokens"] and timed["accepted_tokens"] == spec["accepted_tokens"]
    assert spec["acceptance_rate"] > 0.8  # a model drafting for itself at temperature 0 is nearly always right
