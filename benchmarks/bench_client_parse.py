"""The client's per-chunk parsing, A/B in one run: HTTP/1.1 chunked framing by llhttp (`httptools`, what
evalkit/client/http_stream.py uses) against the hand-written fast path it replaced (one whole chunk per read: find the
size line, check the length, slice), and a chunk's JSON by msgspec's typed structs (evalkit/client/chunk_parse.py)
against orjson with the dictionary fold. CPU (process time) a chunk, on sim-shaped chunks; no sockets.

    python benchmarks/bench_client_parse.py [--chunks 200000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import time

import httptools
import orjson

from evalkit.client.chunk_parse import take_chunk, take_payload
from evalkit.runs.records import RequestRecord

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
BASE = (
    '{"id":"chatcmpl-load-512-1-0","object":"chat.completion.chunk","created":1764680000,"model":"evalkit-sim",'
    '"choices":[{"index":0,"delta":{'
)


def _chunk(text: str) -> bytes:
    body = f'data: {BASE}"content":{json.dumps(text)}}},"finish_reason":null}}]}}\n\n'.encode()
    return f"{len(body):x}\r\n".encode() + body + b"\r\n"


def hand(chunks: list[bytes]) -> float:
    """The replaced fast path, as it ran per read: size line, length check, slice, hand over."""
    out: list[bytes] = []
    sink = out.append
    t = time.process_time()
    for data in chunks:
        eol = data.find(b"\r\n", 0, 18)
        if eol > 0:
            size = int(data[:eol], 16)
            if size and len(data) == eol + size + 4 and data.endswith(b"\r\n"):
                sink(data[eol + 2 : eol + 2 + size])
    return time.process_time() - t


class _Body:
    __slots__ = ("out",)

    def __init__(self) -> None:
        self.out: list[bytes] = []

    def on_body(self, body: bytes) -> None:
        self.out.append(body)


def llhttp(chunks: list[bytes]) -> float:
    """llhttp, as the client feeds it: one feed a read, the body piece through `on_body`."""
    proto = _Body()
    parser = httptools.HttpResponseParser(proto)
    parser.feed_data(HEAD)
    feed = parser.feed_data
    t = time.process_time()
    for data in chunks:
        feed(memoryview(data))
    return time.process_time() - t


def fold_orjson(payloads: list[bytes]) -> float:
    rec, content, reasoning = RequestRecord("r", 0.0), [], []  # type: ignore[var-annotated]
    loads = orjson.loads
    t = time.process_time()
    for p in payloads:
        take_chunk(rec, loads(p), 1.0, content, reasoning)
    return time.process_time() - t


def fold_msgspec(payloads: list[bytes]) -> float:
    rec, content, reasoning = RequestRecord("r", 0.0), [], []  # type: ignore[var-annotated]
    t = time.process_time()
    for p in payloads:
        take_payload(rec, p, 1.0, content, reasoning)
    return time.process_time() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n = args.chunks
    chunks = [_chunk(f" word{i % 50}") for i in range(n)]
    payloads = [c.split(b"\r\n", 1)[1][6:-4] for c in chunks]
    print("| framing: hand-written | framing: llhttp | JSON + fold: orjson | JSON + fold: msgspec |")
    print("|---|---|---|---|")
    for _ in range(args.repeat):
        us = [
            f(x) / n * 1e6
            for f, x in ((hand, chunks), (llhttp, chunks), (fold_orjson, payloads), (fold_msgspec, payloads))
        ]
        print("| " + " | ".join(f"{u:.2f} µs" for u in us) + " |", flush=True)


if __name__ == "__main__":
    main()
