"""The write-up profiles: their settings, flags overriding them, and the short-insert contrast they exist for."""

from __future__ import annotations

import asyncio

from evalkit.client.chat import ChatClient, ChatRequest

SCALE = 20.0
LONG = [
    {
        "role": "user",
        "content": "The secret code is AB-12. "
        + "lorem " * 54000
        + "What is the secret code? Reply with only the code.",
    }
]


def test_profile_settings_and_overrides(sim) -> None:
    before = sim("--profile", "dual-2080ti-before").config()
    assert (before["effective_max_batch"], before["yield_prefill"], before["cancel_aborts"]) == (1, False, False)
    assert before["decode_rate"] == 100.0 and abs(54000 / before["prefill_rate"] - 40) < 1
    after = sim("--profile", "dual-2080ti-after", "--max-batch", "3", "--no-cancel-aborts").config()
    assert after["max_batch"] == 3 and after["cancel_aborts"] is False  # explicit flags win
    assert after["yield_prefill"] is True and (after["decode_rate"], after["batch_decode_rate"]) == (116.0, 186.0)


async def _short_insert_ttft(s, offsets_model_s: list[float]) -> list[float]:
    """Model-second TTFTs of short requests sent at the given offsets into one 54K-token prefill."""
    async with ChatClient(s.base_url, "evalkit-sim") as c:
        await asyncio.gather(
            *[
                c.chat(ChatRequest([{"role": "user", "content": "Hi"}], max_tokens=2))
                for _ in range(len(offsets_model_s) + 1)
            ]
        )
        long_task = asyncio.ensure_future(c.chat(ChatRequest(LONG, max_tokens=4)))

        async def short(i: int, offset: float) -> float:
            await asyncio.sleep(offset / SCALE)
            msgs = [{"role": "user", "content": f"What is {i} + 1? Reply with only the number."}]
            rec = await c.chat(ChatRequest(msgs, max_tokens=4))
            assert rec.status == "ok" and rec.content == str(i + 1)
            return rec.ttft_s * SCALE

        ttfts = await asyncio.gather(*[short(i, off) for i, off in enumerate(offsets_model_s)])
        assert (await long_task).content == "AB-12"
    return list(ttfts)


async def test_short_insert_waits_before_and_not_after(sim) -> None:
    offsets = [0.5, 1.4, 2.2, 3.0]
    before = await _short_insert_ttft(sim("--profile", "dual-2080ti-before", "--time-scale", str(SCALE)), offsets)
    after = await _short_insert_ttft(sim("--profile", "dual-2080ti-after", "--time-scale", str(SCALE)), offsets)
    # Write-up: 39.5 s before, 1.13 s after. Before, every inserted short waits out the rest of the 54K prefill;
    # after, none waits more than a fifth of that. Relative, because a busy machine adds its scheduling delay to
    # every wait (x20 in model seconds): at load average 5-7 on 2 cores the after build's longest was 3.05 s.
    assert min(before) > 30.0
    assert max(after) < min(before) / 5
