"""Chunk times are when the bytes arrived, not when a busy client got round to reading them: a server writes a
token while the client's event loop is blocked, and the record still puts that token at the moment it was written
(the kernel's receive stamp), with the lateness of the read in `read_lag_s`. And `client_lag` says when that
lateness made the client, not the server, the bottleneck."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from evalkit.client import kernel_stamps
from evalkit.client.chat import ChatClient, ChatRequest
from evalkit.client.lag import client_lag
from evalkit.clock import Clock

pytestmark = pytest.mark.skipif(not kernel_stamps.available(), reason="receive stamps are Linux-only")

BLOCK_S = 0.3


def _chunk(body: bytes) -> bytes:
    return f"{len(body):x}\r\n".encode() + body + b"\r\n"


def _event(delta: dict, finish: str | None = None) -> bytes:
    return _chunk(
        f"data: {json.dumps({'choices': [{'index': 0, 'delta': delta, 'finish_reason': finish}]})}\n\n".encode()
    )


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
END = _event({}, "stop") + _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"


async def _run(
    script: list[tuple[float, bytes, str]], block_at_s: float, block_s: float, after_first_token: bool
) -> tuple[object, dict[str, float]]:
    """Serve one streamed answer as `script` says ((delay before, bytes, name) steps, the server in a thread of its
    own), block the client's loop for `block_s` from `block_at_s` (counted from the first token or from the send),
    and return the record and when each named step was written."""
    clock = Clock()
    written: dict[str, float] = {}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(int(v.split(b":")[1]) for v in head.split(b"\r\n") if v.lower().startswith(b"content-length"))
        await reader.readexactly(length)
        for delay, data, name in script:
            await asyncio.sleep(delay)
            written[name] = clock.now()
            writer.write(data)
            await writer.drain()
        writer.close()

    port_ready = asyncio.get_running_loop().create_future()
    loops: list[asyncio.AbstractEventLoop] = []

    def serve() -> None:
        loop = asyncio.new_event_loop()
        loops.append(loop)

        async def main() -> None:
            server = await asyncio.start_server(handle, "127.0.0.1", 0)
            port = server.sockets[0].getsockname()[1]
            port_ready.get_loop().call_soon_threadsafe(port_ready.set_result, port)
            async with server:
                await asyncio.sleep(10)

        try:
            loop.run_until_complete(main())
        except RuntimeError:
            pass  # stopped

    threading.Thread(target=serve, daemon=True).start()
    port = await port_ready
    first: dict[str, float] = {}

    async with ChatClient(f"http://127.0.0.1:{port}/v1", "m", clock=clock) as client:

        async def blocker() -> None:
            while after_first_token and not first:
                await asyncio.sleep(0.005)
            await asyncio.sleep(block_at_s)
            time.sleep(block_s)  # the loop cannot read meanwhile

        task = asyncio.ensure_future(blocker())
        rec = await client.chat(
            ChatRequest([{"role": "user", "content": "hi"}]), on_first_token=lambda t: first.setdefault("t", t)
        )
        await task
    loops[0].call_soon_threadsafe(loops[0].stop)
    return rec, written


async def test_a_token_written_while_the_client_is_blocked_keeps_its_arrival_time() -> None:
    script = [
        (0.0, HEAD + _event({"content": "first"}), "first"),
        (0.1, _event({"content": " second"}), "second"),
        (BLOCK_S + 0.1, END, "end"),
    ]
    rec, written = await _run(script, block_at_s=0.05, block_s=BLOCK_S, after_first_token=True)
    assert rec.status == "ok", rec.error
    assert rec.content == "first second" and len(rec.chunk_times) == 2
    # stamped when it arrived (within a generous 50 ms of the write), not when the blocked loop read it
    assert abs(rec.chunk_times[1] - written["second"]) < 0.05, rec.chunk_times[1] - written["second"]
    assert rec.read_lag_s is not None and rec.read_lag_s > BLOCK_S / 2
    assert rec.first_token_stamp_bound_s == 0.0  # the first token was read on its own: its stamp is its own


async def test_a_first_token_read_together_with_a_later_one_is_counted_in_the_error_budget() -> None:
    # Both tokens arrive while the client's loop is blocked: the kernel merges them and keeps the later stamp, so
    # the first token's stamp may be the second's. The record says by how much at most; the summary counts it.
    script = [(0.05, HEAD + _event({"content": "first"}), "first"), (0.05, _event({"content": " second"}), "second")]
    script.append((BLOCK_S, END, "end"))
    rec, written = await _run(script, block_at_s=0.02, block_s=BLOCK_S, after_first_token=False)
    assert rec.status == "ok", rec.error
    bound = rec.first_token_stamp_bound_s
    assert bound is not None and bound > 0
    # the bound holds the truth: the first token came no earlier than the stamp minus the bound
    assert rec.t_first_token - bound <= written["first"] + 0.005 <= rec.t_first_token + 0.005
    line = rec.to_json()
    budget = client_lag([line, {**line, "first_token_stamp_bound_s": 0.0}])
    assert budget["first_tokens_maybe_shared_stamp"] == 1
    assert budget["error_budget_s"] > 0.001 and budget["over_error_budget"] is True
    assert budget["read_lag_p99_s"] == pytest.approx(rec.read_lag_s)


def test_client_lag_says_when_the_client_was_the_bottleneck() -> None:
    fast_reader = [{"read_lag_s": 0.001, "decode_tok_s": 50.0} for _ in range(20)]
    slow_reader = [{"read_lag_s": 0.060, "decode_tok_s": 50.0} for _ in range(20)]
    assert client_lag(fast_reader)["client_bound"] is False and client_lag(fast_reader)["note"] is None
    slow = client_lag(slow_reader)
    assert slow["client_bound"] is True and "bottleneck" in slow["note"] and slow["token_gap_p50_s"] == 0.02
    assert client_lag([{"read_lag_s": None, "decode_tok_s": 50.0}])["client_bound"] is None
    assert "read_lag_s p95 60.0 ms" in slow["note"] and "token_gap_p50_s 20.0 ms" in slow["note"]  # the figures


@pytest.mark.parametrize("server_rate,bound", [(50.02, False), (50.4, False), (60.0, True)])
def test_client_is_not_the_bottleneck_when_its_rates_match_the_servers(server_rate: float, bound: bool) -> None:
    # The H200 run: read lag above the token gap, but evalkit's decode rates within 0.01% of llama.cpp's timings.
    lines = [
        {
            "read_lag_s": 0.060,
            "decode_tok_s": 50.0,
            "server_timings": {"predicted_per_second": server_rate, "predicted_n": 64},
        }
        for _ in range(20)
    ]
    got = client_lag(lines)
    assert got["client_bound"] is bound and (got["note"] is None) is (not bound)
    assert got["decode_vs_server_p50"] == pytest.approx(abs(50.0 / server_rate - 1))
