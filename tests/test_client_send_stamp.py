"""The send stamp is never late: at 256 streams at once every request reaches the sim after evalkit says it was sent
(the sim's `/sim/events` `arrived`, the kernel's receive stamp on one clock shared with the client, is the truth),
and the first chunk is stamped after the sim wrote it."""

from __future__ import annotations

import asyncio

from evalkit.client import kernel_stamps
from evalkit.client.chat import ChatClient, ChatRequest
from evalkit.clock import Clock

STREAMS = 256


async def test_arrived_is_never_before_t_sent_at_256_streams(sim) -> None:
    clock = Clock()
    s = sim(
        "--time-scale",
        "10",
        "--max-batch",
        str(STREAMS),
        "--decode-rate",
        "50",
        "--batch-decode-rate",
        str(50 * STREAMS),
        clock=clock,
    )
    async with ChatClient(s.base_url, "evalkit-sim", clock=clock) as client:

        async def one(i: int):
            msgs = [{"role": "user", "content": f"Tell me a story about {i}."}]
            # the first request of each stream opens its connection; the second goes out on a pooled one
            first = await client.chat(
                ChatRequest(msgs, max_tokens=8, request_id=f"stamp-{i}-a", extra_body={"ignore_eos": True})
            )
            second = await client.chat(
                ChatRequest(msgs, max_tokens=8, request_id=f"stamp-{i}-b", extra_body={"ignore_eos": True})
            )
            return [first, second]

        recs = [r for pair in await asyncio.gather(*[one(i) for i in range(STREAMS)]) for r in pair]
    events = {e["request_id"]: e for e in s.events()}
    assert len(recs) == 2 * STREAMS
    late = []
    for rec in recs:
        assert rec.status == "ok" and rec.content_chunks == 8, (rec.request_id, rec.status, rec.error)
        ev = events[rec.request_id]
        if ev["arrived"] - rec.t_sent < 0:
            late.append((rec.request_id, round((ev["arrived"] - rec.t_sent) * 1000, 3)))
        assert rec.t_first_token >= ev["first_token"], rec.request_id
        assert rec.t_sent <= rec.t_first_byte <= rec.t_first_token <= rec.t_done
        assert 0 < rec.ttft_s < 30  # generous: a loaded 2-core machine
        # with receive stamps the record says how late its bytes were read; without, it cannot
        assert (rec.read_lag_s is not None and rec.read_lag_s >= 0) is kernel_stamps.available()
    assert not late, f"{len(late)} requests arrived before their t_sent (ms): {late[:5]}"
