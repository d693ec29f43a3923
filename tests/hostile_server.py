"""A hostile OpenAI-compatible server for the secret-scrubbing tests: it echoes every request's headers (the
Authorization header with the key) in its error bodies (400, 401, 500, in turn), in SSE error events, in its
answers, in `/props` and `/v1/models`, and into its own log file.

    python tests/hostile_server.py LOGFILE      # prints its port, then serves on 127.0.0.1 until killed

Chat requests cycle: an answer, HTTP 400, an answer, HTTP 401, an answer, HTTP 500, an answer, an SSE error
event; the very first request (the preflight's) and every request of the capability run's probe are answers.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
import time

from aiohttp import web

CYCLE = ["ok", 400, "ok", 401, "ok", 500, "ok", "sse_error"]


def main() -> None:
    log_path = sys.argv[1]
    turns = itertools.cycle(CYCLE)
    state = {"first": True}

    def headers(request: web.Request) -> dict[str, str]:
        return dict(request.headers)

    def log(request: web.Request, what: str) -> None:
        with open(log_path, "a", encoding="utf-8") as f:
            f.write(
                f"{time.time():.3f} {request.method} {request.path} {what} "
                f"headers={json.dumps(headers(request))} Authorization: {request.headers.get('Authorization')}\n"
            )

    async def models(request: web.Request) -> web.Response:
        log(request, "models")
        return web.json_response(
            {"object": "list", "data": [{"id": "hostile", "object": "model", "meta": {"seen": headers(request)}}]}
        )

    async def props(request: web.Request) -> web.Response:
        log(request, "props")
        return web.json_response(
            {
                "total_slots": 1,
                "build_info": request.headers.get("Authorization"),
                "default_generation_settings": {"n_ctx": 4096, "echo": headers(request)},
            }
        )

    async def refuse(request: web.Request) -> web.Response:
        log(request, "404")
        return web.Response(status=404, text=f"not here; you sent {json.dumps(headers(request))}")

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        turn = "ok" if state["first"] else next(turns)
        state["first"] = False
        log(request, f"chat {turn}")
        echo = headers(request)
        if isinstance(turn, int):
            return web.json_response(
                {
                    "error": {
                        "message": f"refused; you sent {echo}",
                        "headers": echo,
                        "key": request.headers.get("Authorization", "")[7:],
                    }
                },
                status=turn,
            )
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "X-Request-Id": request.headers.get("X-Request-Id", "")}
        )
        await resp.prepare(request)

        async def event(obj: dict) -> None:
            await resp.write(b"data: " + json.dumps(obj).encode() + b"\n\n")

        if turn == "sse_error":
            await event(
                {"error": {"message": f"engine failed; Authorization: {echo.get('Authorization')}", "headers": echo}}
            )
            await resp.write(b"data: [DONE]\n\n")
            return resp
        words = ["The", " answer", " is", " 18.", f" (key {request.headers.get('Authorization', '')[7:]})"]
        max_tokens = int(body.get("max_tokens") or 16)
        for _i, w in enumerate(words[: max(1, max_tokens)]):
            await event(
                {
                    "id": "x",
                    "object": "chat.completion.chunk",
                    "model": "hostile",
                    "choices": [{"index": 0, "delta": {"content": w}, "finish_reason": None}],
                }
            )
            await asyncio.sleep(0.001)
        await event(
            {
                "id": "x",
                "object": "chat.completion.chunk",
                "model": "hostile",
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            }
        )
        await event(
            {
                "id": "x",
                "object": "chat.completion.chunk",
                "model": "hostile",
                "choices": [],
                "usage": {"prompt_tokens": 10, "completion_tokens": len(words)},
            }
        )
        await resp.write(b"data: [DONE]\n\n")
        return resp

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_get("/props", props)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_route("*", "/{tail:.*}", refuse)

    async def serve() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        print(site._server.sockets[0].getsockname()[1], flush=True)  # type: ignore[union-attr]  # started, so the server is set
        await asyncio.Event().wait()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
