"""The client's HTTP/1.1 transport: every framing a server may use, cut at any byte, folds into the same record;
`Connection: close`, error bodies, a body cut short and a cancel behave as they should over a real socket."""

from __future__ import annotations

import asyncio
import json

import pytest

from evalkit.client.chat import ChatClient, ChatRequest, _EventStream
from evalkit.client.http_stream import _Connection
from evalkit.clock import Clock
from evalkit.runs.judge_response import error_kind
from evalkit.runs.records import RequestRecord

CHUNKS = [
    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": None}, "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {"content": "The ans"}, "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {"content": "wer is 4 — für"}, "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}},
]
EVENTS = [f"data: {json.dumps(c, ensure_ascii=False)}\n\n".encode() for c in CHUNKS] + [b"data: [DONE]\n\n"]


def _chunked(pieces: list[bytes], ext: bool = False, trailer: bool = False) -> bytes:
    out = b"".join(f"{len(p):X}{';x=1' if ext else ''}\r\n".encode() + p + b"\r\n" for p in pieces)
    return out + b"0\r\n" + (b"X-Trailer: 1\r\n" if trailer else b"") + b"\r\n"


def _response(framing: str, status: str = "200 OK", events: list[bytes] = EVENTS) -> bytes:
    body = b"".join(events)
    head = f"HTTP/1.1 {status}\r\nContent-Type: text/event-stream\r\n"
    if framing == "chunked":  # one event a chunk, as uvicorn, aiohttp and llama.cpp send
        return (head + "Transfer-Encoding: chunked\r\n\r\n").encode() + _chunked(events)
    if framing == "chunked-odd":  # events split across chunks, hex in capitals, extensions and a trailer
        return (head + "Transfer-Encoding: chunked\r\n\r\n").encode() + _chunked(
            [body[i : i + 7] for i in range(0, len(body), 7)], ext=True, trailer=True
        )
    if framing == "length":
        return (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    if framing == "continue":
        return b"HTTP/1.1 100 Continue\r\n\r\n" + _response("length", status, events)
    assert framing == "close"
    return (head + "Connection: close\r\n\r\n").encode() + body


class _Transport:
    def __init__(self) -> None:
        self.closed = False

    def write(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def _fold(wire: bytes, cut: int | None) -> tuple[RequestRecord, bool, _Connection]:
    """Feed a response to a connection in pieces of `cut` bytes (None: in one piece); (record, ended, connection)."""
    reused: list[_Connection] = []
    conn = _Connection(Clock(), reused.append)
    conn.connection_made(_Transport())  # type: ignore[arg-type]  # a stand-in transport
    rec = RequestRecord("r", 0.0)
    content: list[str] = []
    sink = _EventStream(rec, content, [], None)
    _, done = conn.start(b"request", sink)
    step = cut or len(wire)
    for i in range(0, len(wire), step):
        conn.data_received(wire[i : i + step])
    if not done.done():
        conn.eof_received()
        conn.connection_lost(None)
    sink.flush()
    rec.content = "".join(content)
    assert done.exception() is None
    return rec, bool(reused), conn


@pytest.mark.parametrize("framing", ["chunked", "chunked-odd", "length", "continue", "close"])
@pytest.mark.parametrize("cut", [None, 1, 2, 3, 5, 64])
async def test_every_framing_cut_anywhere_folds_the_same(framing: str, cut: int | None) -> None:
    rec, reused, conn = _fold(_response(framing), cut)
    assert rec.content == "The answer is 4 — für"
    assert (rec.finish_reason, rec.http_status, rec.content_chunks) == ("stop", 200, 2)
    assert (rec.prompt_tokens, rec.completion_tokens, rec.usage_source) == (9, 2, "server")
    assert reused is (framing != "close")  # only a body with an end of its own leaves the connection usable
    assert conn.closed is (framing == "close")


async def _serve(handler) -> tuple[asyncio.AbstractServer, str, dict]:
    seen = {"requests": 0, "connections": 0, "eof_after_s": None}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen["connections"] += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                await reader.readexactly(length)
                seen["requests"] += 1
                if not await handler(reader, writer, seen):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", seen


MSGS = [{"role": "user", "content": "What is 2 + 2?"}]


async def test_connection_close_is_not_reused_and_keep_alive_is() -> None:
    async def answer(reader, writer, seen) -> bool:
        close = seen["requests"] == 1
        writer.write(_response("close" if close else "chunked"))
        await writer.drain()
        return not close

    server, url, seen = await _serve(answer)
    async with server, ChatClient(url, "m") as client:
        recs = [await client.chat(ChatRequest(MSGS)) for _ in range(3)]
    assert [r.status for r in recs] == ["ok"] * 3, [r.error for r in recs]
    assert seen == {"requests": 3, "connections": 2, "eof_after_s": None}  # the 2nd and 3rd share one connection


async def test_error_status_reads_the_body_and_a_body_cut_short_is_an_error() -> None:
    body = b'{"error": {"message": "model overloaded"}}'

    async def answer(reader, writer, seen) -> bool:
        if seen["requests"] == 1:
            writer.write(b"HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n" + _chunked([body]))
        else:  # a stream that stops mid-way: two events, then the connection closes
            writer.write(_response("chunked")[:-60])
        await writer.drain()
        return seen["requests"] == 1

    server, url, _ = await _serve(answer)
    async with server, ChatClient(url, "m") as client:
        refused = await client.chat(ChatRequest(MSGS))
        broken = await client.chat(ChatRequest(MSGS))
    assert (refused.status, refused.http_status) == ("error", 503)
    assert refused.error == 'HTTP 503: {"error": {"message": "model overloaded"}}'
    assert (broken.status, broken.http_status, broken.content) == ("error", 200, "The answer is 4 — für")
    assert broken.error.startswith("RemoteProtocolError: peer closed connection"), broken.error


async def test_an_empty_200_stream_says_so() -> None:
    async def answer(reader, writer, seen) -> bool:  # what llama-cpp-python sends for a prompt over its context
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        )
        await writer.drain()
        return True

    server, url, _ = await _serve(answer)
    async with server, ChatClient(url, "m") as client:
        empty = await client.chat(ChatRequest(MSGS))
    assert (empty.status, empty.http_status, empty.content) == ("error", 200, "")
    assert empty.error.startswith(
        "stream ended without a finish_reason and without one event (HTTP 200, empty stream: "
        "a prompt longer than the server's context"
    ), empty.error
    assert error_kind(empty) == "killed_stream"  # stress's checks read it as they did before the hint


async def _stall(reader, writer, seen) -> bool:
    """Send the head and a first event, then nothing until the client leaves (how long that took is kept)."""
    writer.write(_response("chunked")[:200])
    await writer.drain()
    t0 = asyncio.get_running_loop().time()
    await reader.read()  # returns at the client's FIN
    seen["eof_after_s"] = asyncio.get_running_loop().time() - t0
    return False


async def _until_seen(seen: dict) -> None:
    for _ in range(100):
        if seen["eof_after_s"] is not None:
            return
        await asyncio.sleep(0.02)


async def test_time_limit_and_cancel_event_end_a_stalled_stream() -> None:
    server, url, seen = await _serve(_stall)
    async with server, ChatClient(url, "m") as client:
        timed_out = await client.chat(ChatRequest(MSGS, timeout_s=0.3))
        await _until_seen(seen)
        left_after_timeout, seen["eof_after_s"] = seen["eof_after_s"], None
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(0.3, stop.set)
        cancelled = await client.chat(ChatRequest(MSGS), cancel_event=stop)
        await _until_seen(seen)
    assert (timed_out.status, timed_out.error) == ("timeout", "no completion within 0.3 s")
    assert timed_out.content == "" and timed_out.t_first_byte is not None
    assert 0.25 <= timed_out.t_done - timed_out.t_sent < 2.0
    assert left_after_timeout is not None and left_after_timeout < 2.0  # the server saw the client leave
    assert (cancelled.status, cancelled.error) == ("cancelled", None)
    assert 0.25 <= cancelled.t_done - cancelled.t_sent < 2.0
    assert seen["eof_after_s"] is not None and seen["eof_after_s"] < 2.0


async def test_a_cancelled_caller_closes_the_stream_and_gets_the_cancel() -> None:
    async def answer(reader, writer, seen) -> bool:
        if seen["requests"] == 1:
            return await _stall(reader, writer, seen)
        writer.write(_response("chunked"))
        await writer.drain()
        return True

    server, url, seen = await _serve(answer)
    async with server, ChatClient(url, "m") as client:
        call = asyncio.ensure_future(client.chat(ChatRequest(MSGS)))
        await asyncio.sleep(0.3)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await _until_seen(seen)
        after = await client.chat(ChatRequest(MSGS))  # the same client, on a fresh connection
    assert seen["eof_after_s"] is not None and seen["eof_after_s"] < 2.0
    assert (after.status, after.content, seen["connections"]) == ("ok", "The answer is 4 — für", 2)


async def test_cancel_closes_the_connection_at_once() -> None:
    async def answer(reader, writer, seen) -> bool:
        writer.write(_response("chunked")[:200])  # the head and a first event, then nothing until the client leaves
        await writer.drain()
        t0 = asyncio.get_running_loop().time()
        await reader.read()  # returns at the client's FIN
        seen["eof_after_s"] = asyncio.get_running_loop().time() - t0
        return False

    server, url, seen = await _serve(answer)
    async with server, ChatClient(url, "m") as client:
        rec = await client.chat(ChatRequest(MSGS), cancel_after_s=0.3)
        for _ in range(100):
            if seen["eof_after_s"] is not None:
                break
            await asyncio.sleep(0.02)
    assert rec.status == "cancelled" and rec.error is None
    assert seen["eof_after_s"] is not None and seen["eof_after_s"] < 2.0
