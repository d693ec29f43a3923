"""A server that closes a kept-alive connection as the next request arrives (llama.cpp does now and then):
the client sends that request again once, on a new connection, and says so in the record."""

from __future__ import annotations

import asyncio
import json

from evalkit.client.chat import ChatClient, ChatRequest

CHUNKS = [
    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": None}, "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {"content": "4"}, "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10}},
]


def _sse_response() -> bytes:
    body = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in CHUNKS) + b"data: [DONE]\n\n"
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: keep-alive\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n"
    )
    return head + body


async def _read_request(reader: asyncio.StreamReader) -> bool:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    await reader.readexactly(length)
    return True


async def test_request_on_a_connection_closed_by_the_server_is_sent_again_once():
    served = {"answered": 0, "hung_up": 0}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await _read_request(reader):
                if served["answered"] == 1 and served["hung_up"] == 0:
                    served["hung_up"] += 1  # the second request on the first connection: hang up, no answer
                    break
                served["answered"] += 1
                writer.write(_sse_response())
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server, ChatClient(f"http://127.0.0.1:{port}/v1", "m") as client:
        msgs = [{"role": "user", "content": "What is 2 + 2?"}]
        first = await client.chat(ChatRequest(msgs, max_tokens=4))
        second = await client.chat(ChatRequest(msgs, max_tokens=4))
    assert (first.status, first.content, first.connection_retries) == ("ok", "4", 0)
    assert (second.status, second.content, second.connection_retries) == ("ok", "4", 1), second.error
    assert served == {"answered": 2, "hung_up": 1}
