"""The prefix-cache hit rate by vLLM's own counters (`vllm:prefix_cache_hits` / `vllm:prefix_cache_queries`, in
tokens), on the session's default-scheduler server: a shared-prefix `evalkit load` run reports the counters'
change over the run, which the test reads from `/metrics` itself before and after."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from realserver_support import read_jsonl, run_dir_from, run_evalkit
from vllm_support import BLOCK_TOKENS, counter

pytestmark = pytest.mark.realserver

SYSTEM_TOKENS = 300  # two whole 128-token blocks of a group's system prompt for its second user to reuse


def test_shared_prefix_hit_rate_is_vllms_own(vllm_server: Any, tmp_path: Path) -> None:
    srv = vllm_server()
    names = ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total")
    before = [counter(srv.root_url, n) for n in names]
    args = [
        "load",
        "--base-url",
        srv.base_url,
        "--out",
        str(tmp_path),
        "--name",
        "sp-vllm",
        "--token-scale",
        "1",
        "--output-tokens",
        "1",
        "--max-tokens",
        "8",
        "--timeout-s",
        "120",
        "--shared-prefix",
        "2",
        "--users-per-group",
        "2",
        "--system-tokens",
        str(SYSTEM_TOKENS),
        "--prompt-tokens",
        "16",
    ]
    proc = run_evalkit(args, tmp_path, timeout_s=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    hits, queries = (counter(srv.root_url, n) - b for n, b in zip(names, before))
    run = run_dir_from(proc)
    summary = json.loads((run / "summary.json").read_text())
    lines = read_jsonl(run / "requests.jsonl")
    sp = summary["shared_prefix"]
    m = sp["prefix_cache_metrics"]
    print(
        f"\n[realserver] vLLM shared prefix: {len(lines)} requests; evalkit's figure from the counters {m}; "
        f"the test's own /metrics delta: hits {hits:.0f} of {queries:.0f} queried tokens"
    )
    assert summary["errors"] == 0 and all(x["status"] == "ok" for x in lines)
    assert m is not None and m["source"] == "vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total", m
    # evalkit's window lies inside the test's: the same counters, at most what the test saw.
    assert 0 < m["cached_tokens"] <= hits and 0 < m["prompt_tokens"] <= queries, (m, hits, queries)
    assert m["hit_rate"] == pytest.approx(m["cached_tokens"] / m["prompt_tokens"])
    # Each group's later users (and the warm run's every user) reuse whole blocks of its system prompt.
    assert m["cached_tokens"] % BLOCK_TOKENS == 0 and m["cached_tokens"] >= 2 * BLOCK_TOKENS, m
    cold, warm = sp["runs"]
    print(f"[realserver]   cold run {cold.get('prefix_cache')}, warm run {warm.get('prefix_cache')}")
    assert cold["requests"] == warm["requests"] == 4
