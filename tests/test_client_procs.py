"""Requests spread over worker processes come back as the same records, stamped on the parent's clock; a cancel,
the first-token callback and a long prompt cross the process boundary."""

from __future__ import annotations

import asyncio
import os

from evalkit.client.chat import ChatRequest
from evalkit.client.procs import MultiProcessChatClient
from evalkit.eventloop import fast_loop

STORY = [{"role": "user", "content": "Tell me a story."}]


async def _drive(base_url: str) -> dict:
    async with MultiProcessChatClient(base_url, "evalkit-sim", procs=2) as client:
        before = client.clock.now()
        recs = await asyncio.gather(
            *[
                client.chat(ChatRequest(STORY, max_tokens=6, request_id=f"mp-{i}", extra_body={"ignore_eos": True}))
                for i in range(32)
            ]
        )
        after = client.clock.now()
        first: list[float] = []
        stop = asyncio.Event()
        long = asyncio.ensure_future(
            client.chat(
                ChatRequest(STORY, max_tokens=400, request_id="mp-cancel", extra_body={"ignore_eos": True}),
                cancel_event=stop,
                on_first_token=first.append,
            )
        )
        while not first:
            await asyncio.sleep(0.01)
        stop.set()
        cancelled = await long
        # a long prompt (600 KB) crosses the pipe in pieces: the worker must wait for the whole message
        big = await client.chat(
            ChatRequest(
                [{"role": "user", "content": "lorem ipsum " * 50000 + "Say hi."}], max_tokens=4, request_id="mp-big"
            )
        )
        pids = {w.proc.pid for w in client._workers}
    return {
        "recs": recs,
        "before": before,
        "after": after,
        "first": first,
        "cancelled": cancelled,
        "big": big,
        "pids": pids,
    }


def test_two_worker_processes_serve_requests_on_the_parents_clock(sim) -> None:
    s = sim(
        "--time-scale",
        "10",
        "--max-batch",
        "32",
        "--decode-rate",
        "50",
        "--batch-decode-rate",
        "1600",
        "--prefill-rate",
        "1000000",
    )
    with fast_loop():  # the commands' loop: uvloop makes a pipe it watches non-blocking
        out = asyncio.run(_drive(s.base_url))
    events = {e["request_id"]: e for e in s.events()}
    assert os.getpid() not in out["pids"] and len(out["pids"]) == 2
    assert [r.request_id for r in out["recs"]] == [f"mp-{i}" for i in range(32)]
    for rec in out["recs"]:
        ev = events[rec.request_id]
        assert rec.status == "ok" and rec.content_chunks == 6, rec.error
        assert out["before"] <= rec.t_sent <= ev["arrived"] and rec.t_done <= out["after"]
        assert ev["first_token"] <= rec.t_first_token
    cancelled, big = out["cancelled"], out["big"]
    assert cancelled.status == "cancelled" and out["first"] == [cancelled.t_first_token]
    assert 0 < cancelled.content_chunks < 400
    assert big.status == "ok" and events["mp-big"]["prompt_tokens"] > 90000, big.error
