"""evalkit's ChatClient against a real llama-server: streaming, usage, timings, request ids, cancellation."""

from __future__ import annotations

import asyncio
import random

import pytest
from realserver_support import get_json

from evalkit.client.chat import ChatClient, ChatRequest

pytestmark = pytest.mark.realserver

WORDS = [
    "river",
    "stone",
    "lantern",
    "harvest",
    "orbit",
    "copper",
    "meadow",
    "signal",
    "quartz",
    "ember",
    "willow",
    "canyon",
    "ledger",
    "pilot",
    "cobalt",
    "thistle",
    "harbor",
    "velvet",
    "summit",
    "falcon",
    "marble",
    "tundra",
    "beacon",
    "saffron",
    "glacier",
]


def long_text(root_url: str, tokens: int, seed: int) -> str:
    """Seeded filler that the server's own tokenizer counts at about `tokens` (within 2%)."""
    rng = random.Random(seed)
    words: list[str] = []
    count = 0
    while count < tokens * 0.98:
        words += [rng.choice(WORDS) for _ in range(max(8, int((tokens - count) * 0.6)))]
        count = len(get_json(f"{root_url}/tokenize", {"content": " ".join(words)})["tokens"])
    while count > tokens * 1.02:
        words = words[: int(len(words) * tokens / count)]
        count = len(get_json(f"{root_url}/tokenize", {"content": " ".join(words)})["tokens"])
    return " ".join(words)


async def test_streaming_records_usage_timings_and_the_request_id(llama_server) -> None:
    """One streamed answer: one chunk per token, server usage, llama.cpp timings, our request id kept."""
    srv = llama_server(parallel=1, ctx=8192)
    question = "Count from 1 to 20, separated by commas. Reply with only the numbers."
    async with ChatClient(srv.base_url, srv.model_id) as client:
        assert await client.list_models() == [srv.model_id]
        rec = await client.chat(
            ChatRequest([{"role": "user", "content": question}], max_tokens=80, request_id="ek-realserver-smoke-1")
        )
    t = rec.server_timings or {}
    print(
        f"\n[realserver] answer: {rec.content!r}\n[realserver] ttft {rec.ttft_s:.3f} s, "
        f"{rec.completion_tokens} tokens in {len(rec.chunk_times)} chunks, "
        f"evalkit decode {rec.decode_tok_s:.1f} tok/s, "
        f"llama.cpp predicted_per_second {t.get('predicted_per_second', float('nan')):.1f}"
    )
    assert rec.status == "ok", rec.error
    assert rec.request_id == "ek-realserver-smoke-1"
    assert rec.http_status == 200
    assert rec.content.strip()
    assert rec.finish_reason in ("stop", "length")
    assert rec.usage_source == "server"
    # llama.cpp streams one chunk per token; a token that is only part of a UTF-8 character may be held back.
    assert abs(len(rec.chunk_times) - rec.completion_tokens) <= 2
    assert t["predicted_n"] == rec.completion_tokens
    assert rec.prompt_tokens == t["prompt_n"] + t.get("cache_n", 0)
    assert rec.t_sent < rec.t_first_byte <= rec.t_first_token <= rec.t_done


async def test_cancel_mid_prefill_frees_the_slot_within_one_batch(llama_server) -> None:
    """Closing the stream 1 s into a ~2000-token prefill: the next request starts within a batch, not a prefill."""
    srv = llama_server(parallel=1, ctx=8192, batch=512, ubatch=512)
    text = long_text(srv.root_url, 2000, seed=7)
    long_msgs = [{"role": "user", "content": text + "\nSummarise the text above in one sentence."}]
    short = [{"role": "user", "content": "What is 2 + 3? Reply with only the number."}]
    async with ChatClient(srv.base_url, srv.model_id) as client:
        # The uncancelled prefill, for scale (prompt cache off so the next long request pays in full too).
        full = await client.chat(ChatRequest(long_msgs, max_tokens=1, extra_body={"cache_prompt": False}))
        cancelled_task = asyncio.ensure_future(
            client.chat(ChatRequest(long_msgs, max_tokens=16, extra_body={"cache_prompt": False}), cancel_after_s=1.0)
        )
        await asyncio.sleep(1.2)
        after = await client.chat(ChatRequest(short, max_tokens=8))
        cancelled = await cancelled_task
    slots = get_json(f"{srv.root_url}/slots")
    cancel_logged = "cancel" in srv.log_text().lower()
    print(
        f"\n[realserver] full prefill of {full.prompt_tokens} tokens: {full.ttft_s:.2f} s; "
        f"after a cancel at 1 s the next request's ttft was {after.ttft_s:.2f} s "
        f"(answer {after.content!r}); server log mentions cancel: {cancel_logged}"
    )
    assert full.status == "ok" and abs(full.prompt_tokens - 2000) <= 80, (full.status, full.prompt_tokens)
    assert cancelled.status == "cancelled" and cancelled.t_first_token is None
    assert after.status == "ok", after.error
    # Aborting finishes the current 512-token batch (~3 s here) instead of the whole prefill.
    assert after.ttft_s < 0.6 * full.ttft_s
    assert not any(s.get("is_processing") for s in slots)
