"""The client owns the profile's standing body: every request carries it, under what the request itself adds, in
one process or spread over worker processes; a field the preflight saw refused is still never sent."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from evalkit.client.chat import ChatClient, ChatRequest
from evalkit.client.procs import MultiProcessChatClient

HELLO = [{"role": "user", "content": "hello"}]
STANDING = {"cache_prompt": False, "top_k": 5, "refused_field": 1}


async def _server(seen: list[dict[str, Any]]) -> tuple[web.AppRunner, str]:
    async def chat(request: web.Request) -> web.StreamResponse:
        seen.append(json.loads(await request.read()))
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        chunk = {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}
        await resp.write(f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode())
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}/v1"


async def test_every_request_carries_the_standing_body_under_its_own_fields() -> None:
    seen: list[dict[str, Any]] = []
    runner, url = await _server(seen)
    try:
        omit = frozenset({"refused_field"})
        async with ChatClient(url, "m", standing_body=STANDING, omit_fields=omit) as one:
            assert (await one.chat(ChatRequest(HELLO, max_tokens=4, extra_body={"top_k": 9}))).status == "ok"
            assert (await one.chat(ChatRequest(HELLO, max_tokens=4))).status == "ok"
        async with MultiProcessChatClient(url, "m", procs=2, standing_body=STANDING, omit_fields=omit) as many:
            for i in range(4):
                assert (await many.chat(ChatRequest(HELLO, max_tokens=4, request_id=f"w-{i}"))).status == "ok"
    finally:
        await runner.cleanup()
    assert len(seen) == 6
    assert seen[0]["top_k"] == 9 and seen[0]["cache_prompt"] is False  # the request's own field wins
    for body in seen[1:]:
        assert body["top_k"] == 5 and body["cache_prompt"] is False
    assert not any("refused_field" in b for b in seen)
