"""Requests spread over worker processes come back as the same records, stamped on the parent's clock; a cancel and
the first-token callback cross the process boundary."""

from __future__ import annotations

import asyncio
import os

from evalkit.client import ChatRequest
from evalkit.client_procs import MultiProcessChatClient

STORY = [{"role": "user", "content": "Tell me a story."}]


async def test_two_worker_processes_serve_requests_on_the_parents_clock(sim) -> None:
    s = sim("--time-scale", "10", "--max-batch", "32", "--decode-rate", "50", "--batch-decode-rate", "1600")
    async with MultiProcessChatClient(s.base_url, "evalkit-sim", procs=2) as client:
        before = client.clock.now()
        recs = await asyncio.gather(*[client.chat(ChatRequest(STORY, max_tokens=6, request_id=f"mp-{i}",
                                                              extra_body={"ignore_eos": True})) for i in range(32)])
        after = client.clock.now()
        first: list[float] = []
        stop = asyncio.Event()
        long = asyncio.ensure_future(client.chat(ChatRequest(STORY, max_tokens=400, request_id="mp-cancel",
                                                             extra_body={"ignore_eos": True}),
                                                 cancel_event=stop, on_first_token=first.append))
        while not first:
            await asyncio.sleep(0.01)
        stop.set()
        cancelled = await long
        pids = {w.proc.pid for w in client._workers}
        assert os.getpid() not in pids and len(pids) == 2
    events = {e["request_id"]: e for e in s.events()}
    assert [r.request_id for r in recs] == [f"mp-{i}" for i in range(32)]
    for rec in recs:
        ev = events[rec.request_id]
        assert rec.status == "ok" and rec.content_chunks == 6, rec.error
        assert before <= rec.t_sent <= ev["arrived"] and rec.t_done <= after
        assert ev["first_token"] <= rec.t_first_token
    assert cancelled.status == "cancelled" and first == [cancelled.t_first_token]
    assert 0 < cancelled.content_chunks < 400
