"""Faults are chosen per request from (seed, X-Request-Id), recorded in the sim's event, and seen by the client."""

from __future__ import annotations

import asyncio

from evalkit.client.chat import ChatClient, ChatRequest
from evalkit.sim.faults import choose_fault
from evalkit.sim.settings import SimSettings

SCALE = 10.0
STALL_S = 4.0  # model seconds: 0.4 s real


async def test_faults_hit_the_requests_the_seed_chose(sim) -> None:
    rates = {"fail_rate": 0.25, "disconnect_rate": 0.25, "stall_rate": 0.25}
    s = sim(
        "--time-scale",
        str(SCALE),
        "--max-batch",
        "8",
        "--decode-rate",
        "20",
        "--batch-decode-rate",
        "40",
        "--seed",
        "3",
        "--fail-rate",
        "0.25",
        "--disconnect-rate",
        "0.25",
        "--stall-rate",
        "0.25",
        "--stall-s",
        str(STALL_S),
    )
    ids = [f"f-{i}" for i in range(16)]
    expected = {rid: (f.kind if (f := choose_fault(SimSettings(seed=3, **rates), rid)) else None) for rid in ids}
    assert set(expected.values()) == {None, "http_500", "disconnect", "stall"}  # the table covers every kind
    msgs = [{"role": "user", "content": "Tell me a story."}]
    async with ChatClient(s.base_url, "evalkit-sim") as c:
        recs = await asyncio.gather(*[c.chat(ChatRequest(msgs, max_tokens=20, request_id=rid)) for rid in ids])
    events = {e["request_id"]: e for e in s.events()}
    for rec in recs:
        kind, ev = expected[rec.request_id], events[rec.request_id]
        assert ev["fault"] == kind, rec.request_id
        gaps = [b - a for a, b in zip(rec.chunk_times, rec.chunk_times[1:])]
        if kind == "http_500":
            assert rec.status == "error" and rec.http_status == 500 and ev["status"] == "error"
            assert rec.content_chunks == 0
        elif kind == "disconnect":
            assert rec.status == "error" and ev["status"] == "disconnected"
            # The SDK may drop chunks it had buffered when the stream breaks, so the client can see fewer.
            assert 1 <= rec.content_chunks <= ev["completion_tokens"] < 20
        elif kind == "stall":
            assert rec.status == "ok" and rec.content_chunks == 20
            assert max(gaps) > 0.6 * STALL_S / SCALE
        else:
            assert rec.status == "ok" and rec.content_chunks == 20
            assert max(gaps) < 0.4 * STALL_S / SCALE


async def test_wrong_only_when_batched(sim) -> None:
    s = sim("--time-scale", str(SCALE), "--max-batch", "2", "--wrong-when-batched")
    msgs = [{"role": "user", "content": "What is 2 + 3? Reply with only the number."}]
    async with ChatClient(s.base_url, "evalkit-sim") as c:
        alone = await c.chat(ChatRequest(msgs, request_id="alone"))
        # long enough (~80 ms at this scale) that the second request arrives while the first is decoding
        pair = await asyncio.gather(
            *[
                c.chat(ChatRequest(msgs, max_tokens=100, request_id=f"pair-{i}", extra_body={"ignore_eos": True}))
                for i in range(2)
            ]
        )
    events = {e["request_id"]: e for e in s.events()}
    assert alone.content == "5" and events["alone"]["intended_correct"] is True and events["alone"]["fault"] is None
    wrong = 0
    for rec in pair:
        ev = events[rec.request_id]
        answer = rec.content.split()[0]
        assert (answer == "5") is ev["intended_correct"]
        assert (ev["fault"] == "wrong_when_batched") is (not ev["intended_correct"])
        wrong += answer == "6"
    assert wrong >= 1
