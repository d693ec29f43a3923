"""The engine model over real HTTP: client timing against ground truth, cancel, head-of-line blocking, batching.

Every sim here runs 10x faster than its nominal figures; bounds are generous (the machine is shared), but each is
far from what the opposite setting would give.
"""

from __future__ import annotations

import asyncio

from evalkit.client.chat import ChatClient, ChatRequest

SCALE = 10.0
# 2000 tok/s at 10x: a 20K-token prompt prefills in 1.0 s real, a 1000-token chunk in 0.05 s real.
ENGINE = (
    "--time-scale",
    str(SCALE),
    "--prefill-rate",
    "2000",
    "--prefill-chunk",
    "1000",
    "--decode-rate",
    "100",
    "--batch-decode-rate",
    "180",
    "--max-batch",
    "2",
)
LONG_TOKENS = 20000
LONG_PREFILL_S = LONG_TOKENS / 2000 / SCALE
CHUNK_S = 1000 / 2000 / SCALE


def long_messages() -> list[dict]:
    return [{"role": "user", "content": "word " * LONG_TOKENS + "\nSummarise the text above."}]


def short_messages(a: int = 2) -> list[dict]:
    return [{"role": "user", "content": f"What is {a} + 2? Reply with only the number."}]


async def _warm(c: ChatClient) -> None:
    # Opens the pooled connection and makes the sim load its question index (done once, on first need).
    await c.chat(ChatRequest([{"role": "user", "content": "Hello"}], max_tokens=2))


async def test_client_timing_matches_sim_events(sim) -> None:
    # Real-time speed: the client's own parsing must not fall behind the stream it measures.
    s = sim("--max-batch", "4", "--decode-rate", "100", "--batch-decode-rate", "200")
    async with ChatClient(s.base_url, "evalkit-sim") as c:
        await asyncio.gather(*[_warm(c) for _ in range(4)])  # one pooled connection per concurrent request
        recs = await asyncio.gather(
            *[
                c.chat(
                    ChatRequest(short_messages(i), max_tokens=10, request_id=f"t-{i}", extra_body={"ignore_eos": True})
                )
                for i in range(4)
            ]
        )
    for r in recs:
        ev = s.event(r.request_id)
        assert r.status == "ok" and ev["status"] == "ok"
        assert r.completion_tokens == ev["completion_tokens"] == 10
        assert abs(r.ttft_s - (ev["first_token"] - ev["arrived"])) < 0.03
        assert abs((r.t_done - r.t_sent) - (ev["done"] - ev["arrived"])) < 0.03
        assert r.t_sent <= ev["arrived"] + 0.01 and ev["done"] <= r.t_done + 0.01


async def _cancel_then_short(s) -> tuple:
    async with ChatClient(s.base_url, "evalkit-sim") as c:
        await _warm(c)
        long_rec = await c.chat(
            ChatRequest(long_messages(), max_tokens=8, request_id="long"), cancel_after_s=0.5 / SCALE
        )
        short_rec = await c.chat(ChatRequest(short_messages(), max_tokens=4, request_id="next"))
    return long_rec, short_rec, s.event("long", wait_s=5), s.event("next")


async def test_cancel_aborts_prefill(sim) -> None:
    s = sim(*ENGINE, "--no-yield", "--cancel-aborts")
    long_rec, short_rec, long_ev, next_ev = await _cancel_then_short(s)
    assert long_rec.status == "cancelled" and long_ev["cancelled"] is True and long_ev["status"] == "cancelled"
    assert long_ev["first_token"] is None and long_ev["prefill_done"] is None
    # The prefill stopped at a chunk boundary, so the next request starts within about one chunk.
    assert long_ev["done"] - long_ev["prefill_start"] < 0.5 / SCALE + 4 * CHUNK_S
    assert short_rec.status == "ok" and short_rec.ttft_s < 4 * CHUNK_S + 0.1
    assert next_ev["prefill_start"] >= long_ev["done"] - 0.002


async def test_cancel_without_abort_occupies_the_engine(sim) -> None:
    s = sim(*ENGINE, "--no-yield", "--no-cancel-aborts")
    long_rec, short_rec, long_ev, next_ev = await _cancel_then_short(s)
    assert long_rec.status == "cancelled" and long_ev["cancelled"] is True
    assert long_ev["prefill_done"] is not None  # the whole prompt was prefilled anyway
    assert long_ev["prefill_done"] - long_ev["prefill_start"] > 0.9 * LONG_PREFILL_S
    # The next request waited for the rest of the cancelled prefill.
    assert short_rec.ttft_s > 0.7 * LONG_PREFILL_S
    assert next_ev["prefill_start"] >= long_ev["prefill_done"] - 0.002


async def _short_during_long(s, insert_after_s: float) -> tuple:
    async with ChatClient(s.base_url, "evalkit-sim") as c:
        await _warm(c)
        long_task = asyncio.ensure_future(c.chat(ChatRequest(long_messages(), max_tokens=4, request_id="long")))
        await asyncio.sleep(insert_after_s)
        short_rec = await c.chat(
            ChatRequest(short_messages(), max_tokens=4, request_id="short", extra_body={"ignore_eos": True})
        )
        long_rec = await long_task
    return long_rec, short_rec


async def test_no_yield_blocks_short_requests_behind_a_long_prefill(sim) -> None:
    s = sim(*ENGINE, "--no-yield")
    long_rec, short_rec = await _short_during_long(s, 0.3 * LONG_PREFILL_S)
    assert long_rec.status == short_rec.status == "ok"
    assert short_rec.ttft_s > 0.5 * LONG_PREFILL_S
    assert short_rec.t_first_token >= s.event("long")["prefill_done"]


async def test_yield_admits_short_requests_between_chunks(sim) -> None:
    s = sim(*ENGINE, "--yield", "--yield-decode-steps", "1")
    long_rec, short_rec = await _short_during_long(s, 0.3 * LONG_PREFILL_S)
    assert long_rec.status == short_rec.status == "ok"
    assert short_rec.ttft_s < 4 * CHUNK_S + 0.1
    long_ev, short_ev = s.event("long"), s.event("short")
    assert short_ev["done"] < long_ev["prefill_done"]  # the short one finished inside the long prefill
    # One decode step per chunk: its 4 tokens take about 3 chunks, not 4 / 100 tok/s.
    assert short_rec.completion_tokens == 4
    assert short_ev["done"] - short_ev["first_token"] > 2 * CHUNK_S


async def _two_at_once(s) -> list[dict]:
    async with ChatClient(s.base_url, "evalkit-sim") as c:
        await _warm(c)
        recs = await asyncio.gather(
            *[
                c.chat(
                    ChatRequest(short_messages(i), max_tokens=40, request_id=f"b-{i}", extra_body={"ignore_eos": True})
                )
                for i in range(2)
            ]
        )
    assert all(r.status == "ok" and r.completion_tokens == 40 for r in recs)
    return sorted((s.event(f"b-{i}") for i in range(2)), key=lambda e: e["first_token"])


async def test_two_slots_serve_two_requests_at_once(sim) -> None:
    first, second = await _two_at_once(sim(*ENGINE))
    assert second["first_token"] < first["done"]
    # 40 tokens at 180 tok/s combined (90 each) at 10x: ~0.044 s; one at a time would be twice as long.
    assert second["done"] - first["first_token"] < 0.8 * (80 / 100 / SCALE)


async def test_clamped_batch_serves_one_at_a_time_and_logs_once(sim) -> None:
    s = sim(*ENGINE, "--clamp-batch")
    first, second = await _two_at_once(s)
    # Served together, the second would start ~40 ms (the first's whole decode) before the first is done; the
    # 10 ms allowance is for the handler stamping `done` after the engine's timeline on a loaded machine.
    assert second["prefill_start"] >= first["done"] - 0.010
    assert s.stderr_text().count("explicit-token safety max_batch limited 2 -> 1") == 1
    assert s.config()["effective_max_batch"] == 1


def test_sim_config_names_the_settings_fields_in_order() -> None:
    """`SimConfig` (what /sim/config gives back) names SimSettings' fields, then the effective slot count."""
    from dataclasses import fields

    from evalkit.sim.settings import SimConfig, SimSettings

    assert list(SimConfig.__annotations__) == [f.name for f in fields(SimSettings)] + ["effective_max_batch"]
