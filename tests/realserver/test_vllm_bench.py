"""`evalkit bench` against a real vLLM (the session's default-scheduler server): every request's token counts are
the ones vLLM's own counters add up to, and the server's rates stand beside evalkit's."""

from __future__ import annotations

import json
from typing import Any

import pytest
from realserver_support import read_jsonl, run_dir_from, run_evalkit

pytestmark = pytest.mark.realserver

MAX_TOKENS = 64  # ~1-2 s a request on 2 idle cores; the whole run is 6 requests


@pytest.fixture(scope="module")
def bench(vllm_server: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(summary, request lines) of one `evalkit bench --runs 1 --concurrency 2` run."""
    srv = vllm_server()
    out = tmp_path_factory.mktemp("vllm-bench")
    proc = run_evalkit(
        [
            "bench",
            "--base-url",
            srv.base_url,
            "--runs",
            "1",
            "--max-tokens",
            str(MAX_TOKENS),
            "--concurrency",
            "2",
            "--out",
            str(out),
            "--name",
            "bench-vllm",
        ],
        cwd=out,
        timeout_s=300,
    )
    assert proc.returncode == 0, proc.stderr
    run = run_dir_from(proc)
    return json.loads((run / "summary.json").read_text()), read_jsonl(run / "requests.jsonl")


def _vllm_counter(summary: dict[str, Any], name: str) -> float:
    """A `vllm:` counter's change over the run, as evalkit recorded it (summed over labels)."""
    counters = summary["server_metrics"]["counters"]
    return sum(v for k, v in counters.items() if k.split("{", 1)[0] == name)


def _measured_runs(lines: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """The request lines of prompt `name`'s measured runs (its single-stream phase)."""
    return [x for x in lines if x.get("phase") == "single" and x.get("prompt") == name]


def _in_one_read(lines: list[dict[str, Any]], name: str) -> bool:
    """Whether every measured run of prompt `name` came in one read (first and last token share a stamp): then no
    decode rate can be measured, and bench shows none ("-", no runs) rather than a made-up one. A busy machine does
    this: run 21 of 2026-12-06, two busy loops, vLLM held the code prompt's answer 1.15 s and sent all 64 tokens
    at once."""
    mine = _measured_runs(lines, name)
    return bool(mine) and all(x.get("t_first_token") == x.get("t_last_token") for x in mine)


def _held_then_sent(lines: list[dict[str, Any]], name: str, server_tok_s: float) -> bool:
    """Whether vLLM held the first tokens of prompt `name` and sent them in a burst, in every measured run: the client
    saw the tokens after the first arrive in less time than vLLM's own rate needs to make them, and its first token
    came late by at least the difference (vLLM made them while the client waited for the first). Then the client's
    decode window is not vLLM's pace. A busy machine does this to the math prompt (two busy loops, 2026-12-06): run 23,
    first token at 1.13 s (0.09 s for the others), the other 63 within 0.12 s, 510 tok/s by the client against
    vLLM's 57; run 24, first token at 0.46 s, 75.5 against 55.6. A token-count or unit error fails it: the
    count sets what vLLM needs, the client's stamps what it saw."""
    mine = _measured_runs(lines, name)
    for x in mine:
        need = (x["completion_tokens"] - 1) / server_tok_s
        window = x["t_last_token"] - x["t_first_token"]
        if not (window < need and x["ttft_s"] >= need - window):
            return False
    return bool(mine)


def test_bench_token_counts_are_vllms_own(bench: tuple[dict[str, Any], list[dict[str, Any]]]) -> None:
    """Every request ok; the prompt and completion tokens of all of them (warm-up included) add up to the change in
    vLLM's `vllm:prompt_tokens_total` and `vllm:generation_tokens_total` over the run."""
    summary, lines = bench
    assert lines and all(x["status"] == "ok" for x in lines), [x.get("error") for x in lines]
    assert summary["server_metrics"]["available"] is True
    completion = sum(x["completion_tokens"] for x in lines)
    prompt = sum(x["prompt_tokens"] for x in lines)
    print(
        f"\n[realserver] vLLM bench: {len(lines)} requests, {prompt} prompt / {completion} completion tokens; "
        f"vLLM's counters {_vllm_counter(summary, 'vllm:prompt_tokens_total'):.0f} / "
        f"{_vllm_counter(summary, 'vllm:generation_tokens_total'):.0f}"
    )
    for name, entry in summary["prompts"].items():
        print(
            f"[realserver]   {name:6s} evalkit {entry['tok_s']} tok/s (request {entry['request_tok_s']:.2f}), "
            f"server {entry.get('server_tok_s')}, TTFT {entry['ttft_s']:.2f} s"
        )
        assert entry["failed"] == 0
        assert entry["tok_s"] > 0 if entry["tok_s"] is not None else _in_one_read(lines, name) and not entry["runs"]
    assert any(e["tok_s"] is not None for e in summary["prompts"].values()), summary["prompts"]
    conc = summary["concurrent"]
    print(f"[realserver]   2 streams: {conc['combined_tok_s']:.2f} tok/s, server {conc.get('server_combined_tok_s')}")
    assert completion == _vllm_counter(summary, "vllm:generation_tokens_total")
    assert prompt == _vllm_counter(summary, "vllm:prompt_tokens_total")


def test_bench_puts_vllms_rates_beside_evalkits(bench: tuple[dict[str, Any], list[dict[str, Any]]]) -> None:
    """The server-side column is filled from vLLM's `/metrics` and agrees with evalkit's (per prompt within 5% on a
    quiet machine, 25% allowed; two streams within 2%); the length is forced (vLLM honours ignore_eos)."""
    summary, lines = bench
    assert summary["length_forced"] is True, summary["length_mode"]
    for name, entry in summary["prompts"].items():
        assert entry["server_tok_s"] is not None, name
        if entry["tok_s"] is None:  # every run in one read: no client rate to compare (see _in_one_read)
            assert _in_one_read(lines, name), (name, entry)
            continue
        # Within 5% on a quiet machine; with two busy loops beside the suite the client reads vLLM's tokens in bursts
        # (run 19 of 2026-12-06: math 68.8 tok/s against vLLM's 61.2, 12.6%). A unit or counting error is far larger.
        if abs(entry["tok_s"] / entry["server_tok_s"] - 1) > 0.25:
            # Faster than vLLM only where vLLM held the first tokens (see _held_then_sent); the whole request still
            # cannot have outrun vLLM's engine.
            assert _held_then_sent(lines, name, entry["server_tok_s"]), (name, entry["tok_s"], entry["server_tok_s"])
            assert entry["request_tok_s"] <= entry["server_tok_s"] * 1.25, (name, entry)
    # Two streams (issue 57): vLLM's tokens and decode-time sum over the pair's window, shared among the streams as
    # the client's windows share it (evalkit.evidence.metrics_rates.combined_decode_rate): within 2% of evalkit's
    # combined rate (0.02-0.12% on 2 idle cores, 2026-12-07; sharing by tokens had read 2.9-3.9% high). Where vLLM
    # merged tokens into fewer chunks than tokens the client fell behind its stream, and 10% is allowed.
    conc = summary["concurrent"]
    assert conc["server_combined_tok_s"] is not None, conc
    streams = [x for x in lines if x.get("phase") == "concurrent"]
    merged = any((x.get("content_chunks") or 0) < x["completion_tokens"] - 1 for x in streams)
    assert abs(conc["vs_server"]) <= (0.10 if merged else 0.02), (conc, [x.get("content_chunks") for x in streams])
