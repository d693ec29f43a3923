"""One streamed `chat.completion.chunk` into the record: decoded by msgspec into typed structs that read only the
fields evalkit keeps (choices' delta text, finish_reason, usage, timings, an error), the rest skipped unbuilt.

A chunk whose shape the structs do not take (a string where an object was expected, a list of choices that is not
a list ...) is decoded again as plain JSON and folded field by field, as before: the structs make the common chunk
cheap, never a server's odd one an error. Measured (benchmarks/bench_client_parse.py): about half orjson's cost a
chunk with the dictionary fold.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import msgspec

from evalkit.runs.records import RequestRecord


class StreamError(Exception):
    """An error event inside an event stream (the server gave up after the HTTP status was sent)."""


class _Delta(msgspec.Struct, gc=False):
    content: Any = None
    reasoning_content: Any = None
    reasoning: Any = None


class _Choice(msgspec.Struct, gc=False):
    delta: _Delta | None = None
    finish_reason: Any = None


class _Chunk(msgspec.Struct, gc=False):
    choices: list[_Choice] | None = None
    usage: Any = None
    timings: Any = None
    error: Any = None


_decode = msgspec.json.Decoder(_Chunk).decode


def _json_loads() -> Callable[[bytes], Any]:
    """orjson's parser where it is installed, else the standard library's (the fallback for odd chunks)."""
    try:
        import orjson
    except ImportError:
        decode = json.JSONDecoder().decode
        # decoded to text first: json's own sniffing of a byte string's encoding costs more than the decode
        return lambda payload: decode(payload.decode("utf-8", "surrogatepass"))
    return orjson.loads


loads = _json_loads()


def take_payload(rec: RequestRecord, payload: bytes, now: float, content: list[str], reasoning: list[str]) -> None:
    """Decode one `data:` payload and fold it into the record (raises `StreamError` at an error event, and the
    JSON decoder's error at a payload that is not JSON)."""
    try:
        chunk = _decode(payload)
    except msgspec.DecodeError:  # a shape the structs do not take (or not JSON: the plain decoder says so)
        take_chunk(rec, loads(payload), now, content, reasoning)
        return
    if chunk.error and not chunk.choices:
        err = chunk.error
        raise StreamError(err.get("message", str(err)) if isinstance(err, dict) else str(err))
    if chunk.timings is not None and isinstance(chunk.timings, dict):  # llama.cpp's own timing figures
        rec.server_timings = chunk.timings
    if chunk.usage is not None and isinstance(chunk.usage, dict):
        _take_usage(rec, chunk.usage)
    for choice in chunk.choices or ():
        delta = choice.delta
        if delta is not None:
            text = delta.content
            # Servers disagree on the field: vLLM/SGLang/llama.cpp use `reasoning_content`, newer vLLM and
            # OpenRouter-style servers use `reasoning`.
            _take_delta(rec, text, delta.reasoning_content or delta.reasoning, now, content, reasoning)
        if choice.finish_reason:
            rec.finish_reason = choice.finish_reason


def _take_delta(
    rec: RequestRecord, text: Any, think: Any, now: float, content: list[str], reasoning: list[str]
) -> None:
    """One choice's delta: its reasoning and its answer text kept apart, each counted, and the chunk's arrival
    stamp kept when it carried either (the first such is the first token; the first answer text, the first answer
    token)."""
    got = False
    if isinstance(think, str) and think:
        reasoning.append(think)
        rec.reasoning_chunks += 1
        got = True
    if isinstance(text, str) and text:
        content.append(text)
        rec.content_chunks += 1
        if rec.t_first_answer_token is None:
            rec.t_first_answer_token = now
        got = True
    if got:
        rec.chunk_times.append(now)
        if rec.t_first_token is None:
            rec.t_first_token = now


def _take_usage(rec: RequestRecord, usage: dict[str, Any]) -> None:
    """A chunk's `usage`: token counts, and the reasoning tokens where the server splits them out."""
    rec.prompt_tokens = usage.get("prompt_tokens")
    rec.completion_tokens = usage.get("completion_tokens")
    rec.usage_source = "server"
    details = usage.get("completion_tokens_details")
    if isinstance(details, dict) and isinstance(details.get("reasoning_tokens"), int):
        rec.reasoning_tokens = details["reasoning_tokens"]
        rec.token_split_source = "server"


def take_chunk(rec: RequestRecord, chunk: Any, now: float, content: list[str], reasoning: list[str]) -> None:
    """Fold one parsed `chat.completion.chunk` (plain JSON) into the record."""
    if not isinstance(chunk, dict):
        return
    if "error" in chunk and chunk["error"] and not chunk.get("choices"):
        err = chunk["error"]
        raise StreamError(err.get("message", str(err)) if isinstance(err, dict) else str(err))
    if "timings" in chunk and isinstance(chunk["timings"], dict):
        rec.server_timings = chunk["timings"]
    if "usage" in chunk and isinstance(chunk["usage"], dict):
        _take_usage(rec, chunk["usage"])
    choices = chunk.get("choices")
    for choice in choices if isinstance(choices, list) else ():
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta")
        delta = delta if isinstance(delta, dict) else {}
        think = delta.get("reasoning_content") or delta.get("reasoning")
        _take_delta(rec, delta.get("content"), think, now, content, reasoning)
        if choice.get("finish_reason"):
            rec.finish_reason = choice["finish_reason"]
