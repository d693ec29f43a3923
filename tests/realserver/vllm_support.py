"""What the vLLM tests read from vLLM itself: its Prometheus counters, its log, and the prefix cache as a record of
how much of a prompt the engine computed."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path
from typing import Any

from realserver_support import get_json, read_jsonl

from evalkit.client.tokenize import messages_for
from evalkit_stress.resume import load_fitted
from evalkit_stress.scenario_file import load_scenarios
from evalkit_stress.schedule import build_schedule

BLOCK_TOKENS = 128  # vLLM's CPU KV block (vllm:cache_config_info block_size): the prefix cache's unit


def counter(root_url: str, name: str) -> float:
    """The sum over labels of one `vllm:` counter (e.g. `vllm:prefix_cache_hits_total`) in `/metrics` now."""
    with urllib.request.urlopen(f"{root_url}/metrics", timeout=30) as r:
        text = r.read().decode()
    return sum(float(ln.rsplit(" ", 1)[1]) for ln in text.splitlines() if re.match(rf"{re.escape(name)}(\{{| )", ln))


def aborted_in_log(log: str, request_id: str) -> bool:
    """Whether vLLM logged `Aborted request(s) chatcmpl-<id>...` (it does, with --enable-log-requests, when the
    client's disconnect reaches the engine while the request is still running)."""
    return re.search(rf"Aborted request\(s\) [^\n]*chatcmpl-{re.escape(request_id)}\b", log) is not None


def computed_prefix_tokens(server: Any, text: str, timeout_s: float = 300.0) -> tuple[int, int]:
    """(tokens of `text`'s prompt the prefix cache already holds, its prompt tokens): send it once more for one
    token and read how many of its tokens vLLM's `prefix_cache_hits` counter says came from the cache. A prompt
    nobody else shares is in the cache exactly as far as the engine computed it (in whole 128-token blocks)."""
    before = counter(server.root_url, "vllm:prefix_cache_hits_total")
    answer = get_json(
        f"{server.base_url}/chat/completions",
        {"model": server.model_id, "messages": messages_for(text), "max_tokens": 1, "temperature": 0.0},
        timeout=timeout_s,
    )
    hits = counter(server.root_url, "vllm:prefix_cache_hits_total") - before
    return int(hits), int(answer["usage"]["prompt_tokens"])


def whole_blocks(prompt_tokens: int) -> int:
    """The most of a prompt the prefix cache can give back: its whole blocks, less the last token it recomputes."""
    return (prompt_tokens - 1) // BLOCK_TOKENS * BLOCK_TOKENS


def cancelled_prompt(run: Path, seed: int, long_tokens: int, gen_tokens: int) -> str:
    """The cancelled long prompt's text of a one-cycle unsalted stress run (`--reuse-prompts`), rebuilt as the run
    sent it: the seed's schedule plus the fitted length the run recorded."""
    schedule = build_schedule(seed, 1, long_tokens, gen_tokens=gen_tokens)
    rows = read_jsonl(run / "long_prompts.jsonl")
    fitted = load_fitted(rows, schedule)
    row = next(r for r in rows if r["plan_id"].endswith("cancel_then_short-long"))
    spec = next(q for q in fitted if (q.first_word, q.code) == (row["first_word"], row["code"]))
    return fitted[spec].text


def cancelled_prompts(run: Path, seed: int, cycles: int, long_tokens: int, gen_tokens: int) -> dict[int, str]:
    """Each cycle's cancelled long prompt of an unsalted stress run (`--reuse-prompts`) of the scenario file the run
    recorded (`scenarios.toml`), rebuilt as the run sent it: cycle -> text."""
    schedule = build_schedule(
        seed, cycles, long_tokens, gen_tokens=gen_tokens, scenarios=load_scenarios(run / "scenarios.toml")
    )
    rows = read_jsonl(run / "long_prompts.jsonl")
    fitted = load_fitted(rows, schedule)
    out = {}
    for row in rows:
        if row["plan_id"].endswith("cancel_then_short-long"):
            spec = next(q for q in fitted if (q.first_word, q.code) == (row["first_word"], row["code"]))
            out[int(row["cycle"])] = fitted[spec].text
    return out
