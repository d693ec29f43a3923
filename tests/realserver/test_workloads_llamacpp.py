"""Issue 31 on a real CPU llama-server (the shared np2 server): a 3-user, 3-turn conversation run and a shared-prefix
run report llama.cpp's own prompt-cache reuse per turn and per run (`timings.cache_n` in each answer), and the run's
total from its `/metrics` (`llamacpp:prompt_tokens_cached_total`) agrees with the answers' sum.

llama.cpp caches prompts by default (`cache_prompt` on, slots chosen by prompt similarity, a host prompt cache of
`--cache-ram`), so a conversation's later turns and a group's later users reuse what came before. Erasing slots needs
`--slot-save-path`, which the shared server does not have: the cold run records that the reset was refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from realserver_support import get_json, read_jsonl, run_dir_from, run_evalkit

FAST = [
    "--token-scale",
    "1",
    "--output-tokens",
    "1",
    "--max-tokens",
    "8",
    "--timeout-s",
    "60",
]  # SmolLM2 cannot count: cap it


def run_workload(srv: Any, tmp_path: Path, name: str, *flags: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    args = ["load", "--base-url", srv.base_url, "--out", str(tmp_path), "--name", name, *FAST, *flags]
    proc = run_evalkit(args, tmp_path, timeout_s=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = run_dir_from(proc)
    return json.loads((run / "summary.json").read_text()), read_jsonl(run / "requests.jsonl")


def test_conversation_and_shared_prefix_report_llamacpp_cache_reuse(llama_server: Any, tmp_path: Path) -> None:
    srv = llama_server(parallel=2, ctx=8192)
    conv, lines = run_workload(srv, tmp_path, "conv", "--conversations", "3", "--turns", "3", "--prompt-tokens", "24")
    c = conv["conversation"]
    assert conv["requests"] == 9 and conv["errors"] == 0 and c["sessions"]["completed"] == 3
    assert all(isinstance(x["cache_n"], int) for x in lines)  # llama.cpp's own figure, on every answer
    rates = [t["prefix_cache"]["hit_rate"] for t in c["per_turn"]]
    print(f"[realserver] conversation 3x3 prefix-cache hit rate per turn (cache_n): {[round(r, 3) for r in rates]}")
    # Every later turn carries the earlier one as its prefix: llama.cpp reuses it.
    assert rates[1] > rates[0] and rates[2] > rates[0], rates
    m = c["prefix_cache_metrics"]
    assert m is not None and m["source"].startswith("llamacpp:prompt_tokens_cached_total"), m
    # The counters count everything the server did between the snapshots: this run's answers, nothing else.
    assert m["cached_tokens"] == c["prefix_cache"]["cached_tokens"], (m, c["prefix_cache"])
    print(
        f"[realserver] conversation hit rate by /metrics {m['hit_rate']:.3f}, by cache_n "
        f"{c['prefix_cache']['hit_rate']:.3f}"
    )

    sp, sp_lines = run_workload(
        srv,
        tmp_path,
        "sp",
        "--shared-prefix",
        "2",
        "--users-per-group",
        "2",
        "--system-tokens",
        "160",
        "--prompt-tokens",
        "16",
    )
    cold, warm = sp["shared_prefix"]["runs"]
    assert cold["reset"] is not None and not cold["reset"]["reset"]  # slot erase needs --slot-save-path (501)
    assert any(t.get("status") == 501 for t in cold["reset"]["tried"]), cold["reset"]
    assert cold["requests"] == warm["requests"] == 4 and sp["errors"] == 0
    assert cold["cold_verified"] is True  # these system prompts are new to the server: nothing to reuse yet
    first = [x["cache_n"] for x in sp_lines if x.get("run") == "cold" and x.get("user") == 0]
    later = [x["cache_n"] for x in sp_lines if x.get("run") == "cold" and x.get("user") == 1]
    print(
        f"[realserver] shared prefix cache_n cold first users {first}, second users {later}; hit rate cold "
        f"{cold['prefix_cache']['hit_rate']:.3f} warm {warm['prefix_cache']['hit_rate']:.3f}"
    )
    assert all(b > a for a, b in zip(first, later))  # a group's second user reuses its system prompt
    assert warm["prefix_cache"]["hit_rate"] > cold["prefix_cache"]["hit_rate"]


def test_trace_blocks_are_token_blocks_on_the_servers_tokenizer(llama_server: Any) -> None:
    """A trace prompt's tokens are its blocks' tokens one after the other: block edges are token edges on the
    server's own tokenizer, so equal hash ids are equal token blocks wherever they appear."""
    from evalkit.load.trace import TraceLine, TraceOptions, block_tokens_text, build_trace_request

    srv = llama_server(parallel=2, ctx=8192)

    def tokens(text: str) -> list[int]:
        return list(get_json(srv.root_url + "/tokenize", {"content": text})["tokens"])

    block = 32
    opts = TraceOptions(block_tokens=block)
    # Three ids of whole blocks and more of the request's own; a last block cut short; another first block.
    for ids, length in (([1, 2, 3], 200), ([1, 2, 4], 90), ([7, 2, 3], 200)):
        line = TraceLine(timestamp=0, input_length=length, output_length=3, hash_ids=ids)
        req = build_trace_request(line, 0, opts, 1)
        body, question = req.prompt.split("\n\n", 1)
        pieces = []
        for h in ids:  # each block as the replay wrote it: whole, or its start when the prompt ends inside it
            text = "".join(block_tokens_text(h, block))
            text = text.lstrip() if not pieces else text
            done = "".join(pieces)
            pieces.append(text if body.startswith(done + text) else body[len(done) :])
            if not body.startswith(done + text):
                break
        if len("".join(pieces)) < len(body):
            pieces.append(body[len("".join(pieces)) :])  # the request's own filler after its blocks
        assert "".join(pieces) == body and all(p.startswith(" ") for p in pieces[1:])
        assert tokens(req.prompt) == [t for p in pieces for t in tokens(p)] + tokens("\n\n" + question), ids
