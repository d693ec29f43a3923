"""The one HTTP stack for auxiliary calls, on aiohttp: the model list, `/metrics` scrapes, `/props` and the other
identity endpoints, `/tokenize`, and the preflight's probes. Every module that makes such a call takes its session
(`session()`), timeout and error types from here, and reads bodies with `read_body`/`read_text`/`read_json`
(tests/test_import_layers.py checks that none imports aiohttp itself).

Every body is bounded: at most `MAX_BODY_BYTES` after decompression (bodies are read piece by piece and inflated
here with a cap, never whole: a 1 MB gzip body that inflates to 2 GB stops at the cap), and JSON at most
`MAX_JSON_DEPTH` deep. A body over a bound is a `BodyTooLarge` (a `ClientError`, as a broken connection is); JSON
too deep is a `ValueError`, as JSON that does not parse is.

The measured requests never come here: they go through evalkit.client.chat on evalkit's own transport
(evalkit.client.http_stream), which stamps each chunk with the kernel's receive time.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

from aiohttp import ClientError, ClientResponse, ClientSession, ClientTimeout

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_JSON_DEPTH",
    "BodyTooLarge",
    "ClientError",
    "ClientResponse",
    "ClientSession",
    "ClientTimeout",
    "parse_json",
    "read_body",
    "read_json",
    "read_text",
    "session",
]

# Far above any real answer (vLLM's /metrics ~200 KB, a model list or /props a few KB), far below a memory problem.
MAX_BODY_BYTES = 8 * 1024 * 1024
# Real answers nest a handful of levels; deeper JSON is refused before any code walks it.
MAX_JSON_DEPTH = 64
# Encodings this module inflates itself (aiohttp's own inflating is switched off: before 3.13 it inflated a whole
# network read at once, unbounded).
_ENCODINGS = {"gzip": 31, "x-gzip": 31, "deflate": 15 + 32}


class BodyTooLarge(ClientError):
    """A body over its byte bound (counted after decompression), or in an encoding that cannot be read."""


def session(headers: dict[str, str] | None = None, timeout: ClientTimeout | None = None) -> ClientSession:
    """A session whose bodies are read through this module: compressed ones are inflated here, with a cap."""
    return ClientSession(
        headers={"Accept-Encoding": "gzip, deflate", **(headers or {})},
        timeout=timeout or ClientTimeout(total=300),
        auto_decompress=False,
    )


async def read_body(resp: ClientResponse, limit: int = MAX_BODY_BYTES) -> bytes:
    """The body's bytes, decompressed, read piece by piece; `BodyTooLarge` as soon as they pass `limit`."""
    length = resp.headers.get("Content-Length", "")
    encoding = resp.headers.get("Content-Encoding", "").strip().lower()
    if encoding in ("", "identity"):
        inflate = None
        if length.isdigit() and int(length) > limit:
            raise BodyTooLarge(f"body of {int(length)} bytes, over the {limit}-byte limit")
    elif encoding in _ENCODINGS:
        inflate = zlib.decompressobj(wbits=_ENCODINGS[encoding])
    else:
        raise BodyTooLarge(f"body in content encoding {encoding!r}, which evalkit does not read")
    out = bytearray()
    async for piece in resp.content.iter_any():
        if inflate is not None:
            try:
                piece = inflate.decompress(piece, limit - len(out) + 1)
            except zlib.error as e:
                raise BodyTooLarge(f"{encoding} body that does not inflate: {e}") from None
            if inflate.unconsumed_tail:
                raise BodyTooLarge(f"{encoding} body that inflates past the {limit}-byte limit")
        out += piece
        if len(out) > limit:
            raise BodyTooLarge(f"body over the {limit}-byte limit")
    return bytes(out)


async def read_text(resp: ClientResponse, limit: int = MAX_BODY_BYTES) -> str:
    """The body as text (UTF-8, undecodable bytes replaced), bounded as `read_body`."""
    return (await read_body(resp, limit)).decode("utf-8", errors="replace")


async def read_json(resp: ClientResponse, limit: int = MAX_BODY_BYTES) -> Any:
    """The body as JSON, bounded as `read_body` and `parse_json` (ValueError when it is not JSON)."""
    return parse_json(await read_body(resp, limit))


def parse_json(data: str | bytes) -> Any:
    """JSON at most `MAX_JSON_DEPTH` deep; ValueError for JSON that does not parse or nests deeper."""
    try:
        value = json.loads(data)
    except RecursionError:
        raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    if json_depth(value) > MAX_JSON_DEPTH:
        raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    return value


def json_depth(value: Any) -> int:
    """How deep lists and objects nest in a parsed JSON value (0 for a scalar), walked without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        if deepest > MAX_JSON_DEPTH:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest
