"""A hostile front for a sim, for the bounds tests: it passes every request through to the sim, except the one its
mode spoils. The mode is the base URL's first path component: `http://127.0.0.1:PORT/<mode>/v1`.

Modes: `ok` (nothing spoilt), `gzip-models` (/v1/models a gzip body that inflates to 512 MB), `deep-props` (a
100,000-deep /props), `list-props` (/props a JSON list), `props-gen-list` (/props whose settings are a list),
`binary-metrics` (random bytes), `huge-metrics` (a 100 MB /metrics, sent slowly), `huge-event` (measured
chat requests: a stream whose first event is 10 MB), `no-end` (measured chat requests: a stream that sends one
token and then nothing, without a finish or [DONE]), `empty-answer` (measured chat requests: a finished answer with
no text), `deep-models` (a 100,000-deep model list); every chat request,
the preflight's included: `probe-no-end` (one token, then nothing), `probe-huge` (a 100 MB answer of small events),
`probe-huge-fast` (100 MB in 512 KB events, at once), `probe-huge-event` (one 10 MB event), `probe-bad-utf8` (an
answer of invalid UTF-8).

Runs in a thread of the test process (`HostileProxy(sim_url).start()`), on its own event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import zlib
from typing import Any

import aiohttp
from aiohttp import web

DEEP = b"[" * 100_000 + b"]" * 100_000
_GZIP_BOMB: list[bytes] = []


def gzip_bomb() -> bytes:
    """A gzip body of ~1 MB that inflates to 512 MB of spaces (made once, in one gzip member)."""
    if not _GZIP_BOMB:
        block = b" " * (1 << 20)
        c = zlib.compressobj(9, zlib.DEFLATED, 31)
        _GZIP_BOMB.append(b"".join([*(c.compress(block) for _ in range(512)), c.flush()]))
    return _GZIP_BOMB[0]


class HostileProxy:
    """The proxy: `start()` returns its root URL (`http://127.0.0.1:PORT`); `stop()` ends it."""

    def __init__(self, sim_root: str) -> None:
        self.sim_root = sim_root.rstrip("/")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self._client: aiohttp.ClientSession | None = None
        self._closing = asyncio.Event()

    def start(self) -> str:
        self._thread.start()
        port = asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(30)
        return f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _serve(self) -> int:
        self._client = aiohttp.ClientSession(auto_decompress=False)
        app = web.Application(client_max_size=1 << 26)
        app.router.add_route("*", "/{mode}/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        return int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]

    async def _close(self) -> None:
        self._closing.set()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._client is not None:
            await self._client.close()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        mode, tail = request.match_info["mode"], "/" + request.match_info["tail"]
        spoilt = await self._spoil(mode, tail, request)
        if spoilt is not None:
            return spoilt
        return await self._pass(request, tail)

    async def _spoil(self, mode: str, path: str, request: web.Request) -> web.StreamResponse | None:
        if mode == "gzip-models" and path == "/v1/models":
            return web.Response(
                body=gzip_bomb(), headers={"Content-Encoding": "gzip", "Content-Type": "application/json"}
            )
        if mode == "deep-models" and path == "/v1/models":
            return web.Response(body=DEEP, content_type="application/json")
        if mode == "deep-props" and path == "/props":
            return web.Response(body=DEEP, content_type="application/json")
        if mode == "list-props" and path == "/props":
            return web.json_response([1, 2, 3])
        if mode == "props-gen-list" and path == "/props":
            return web.json_response({"total_slots": [], "default_generation_settings": [1]})
        if mode == "binary-metrics" and path == "/metrics":
            return web.Response(body=os.urandom(4096), content_type="application/octet-stream")
        if mode == "huge-metrics" and path == "/metrics":
            resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
            await resp.prepare(request)
            line = b"# HELP x y\n" + b"a_total 1\n" * 10_000
            for _ in range(100 * 1024 * 1024 // len(line)):
                await resp.write(line)
                await asyncio.sleep(0.001)
            return resp
        if mode.startswith("probe-") and path == "/v1/chat/completions":
            return await self._spoil_every_answer(mode, request)
        if mode == "empty-answer" and path == "/v1/chat/completions":
            if request.headers.get("X-Request-Id", "preflight").startswith("preflight"):
                return None  # the preflight's probes pass
            await request.read()
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            await resp.write(b'data: {"choices":[{"index":0,"delta":{"content":""},"finish_reason":"stop"}]}\n\n')
            await resp.write(b"data: [DONE]\n\n")
            return resp
        if mode in ("huge-event", "no-end") and path == "/v1/chat/completions":
            rid = request.headers.get("X-Request-Id", "preflight")
            if rid.startswith("preflight"):
                return None  # the preflight's probes pass
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            if mode == "huge-event":
                await resp.write(
                    b'data: {"choices":[{"index":0,"delta":{"content":"' + b"x" * (10 << 20) + b'"}}]}\n\n'
                )
                await resp.write(b"data: [DONE]\n\n")
                return resp
            await resp.write(b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n')
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._closing.wait(), 600)
            return resp
        return None

    async def _spoil_every_answer(self, mode: str, request: web.Request) -> web.StreamResponse:
        # Every chat request, the preflight's probes included (issue #56).
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        event = b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
        with contextlib.suppress(ConnectionError, RuntimeError):
            if mode == "probe-no-end":  # one token, then nothing
                await resp.write(event)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._closing.wait(), 600)
            elif mode == "probe-huge":  # a 100 MB answer of small events, sent over a minute
                many = event * 1000
                for _ in range(100 * 1024 * 1024 // len(many)):
                    await resp.write(many)
                    await asyncio.sleep(0.01)
            elif mode == "probe-bad-utf8":  # an answer whose text is not UTF-8
                await resp.write(
                    b'data: {"choices":[{"index":0,"delta":{"content":"\xff\xfe OK"},"finish_reason":null}]}\n\n'
                )
                await resp.write(
                    b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
                )
            elif mode == "probe-huge-fast":  # a 100 MB answer in 512 KB events, at once
                piece = b'data: {"choices":[{"index":0,"delta":{"content":"' + b"y" * (512 << 10) + b'"}}]}\n\n'
                for _ in range(200):
                    await resp.write(piece)
                await resp.write(b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n')
                await resp.write(b"data: [DONE]\n\n")
            elif mode == "probe-huge-event":  # one 10 MB event
                await resp.write(
                    b'data: {"choices":[{"index":0,"delta":{"content":"' + b"x" * (10 << 20) + b'"}}]}\n\n'
                )
                await resp.write(b"data: [DONE]\n\n")
        return resp

    async def _pass(self, request: web.Request, path: str) -> web.StreamResponse:
        assert self._client is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        data = await request.read()
        async with self._client.request(
            request.method, self.sim_root + path, params=request.query, headers=headers, data=data or None
        ) as upstream:
            out: dict[str, Any] = {
                k: v
                for k, v in upstream.headers.items()
                if k.lower() not in ("content-length", "transfer-encoding", "connection", "date", "server")
            }
            resp = web.StreamResponse(status=upstream.status, headers=out)
            await resp.prepare(request)
            async for piece in upstream.content.iter_any():
                await resp.write(piece)
            await resp.write_eof()
            return resp
