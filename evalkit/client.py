"""A timed streaming chat client: one request in, one `RequestRecord` out, never an exception.

Timing follows the lessons of vLLM's serve benchmark, done better: one clock, the first token stamped when a
chunk that actually carries text (content or reasoning) arrives, not on the role-only or empty first chunk,
and every chunk's arrival kept so rates are computed from raw samples later.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

import openai

from evalkit.clock import Clock
from evalkit.http_errors import describe, is_uuid
from evalkit.records import RequestRecord
from evalkit.thinking_text import split_inline_reasoning


@dataclass(frozen=True)
class ChatRequest:
    """What to ask: messages and sampling, plus the id and labels to record it under."""

    messages: list[dict[str, Any]]
    max_tokens: int | None = None
    temperature: float | None = 0.0
    extra_body: dict[str, Any] = field(default_factory=dict)
    request_id: str | None = None
    timeout_s: float = 900.0
    tags: dict[str, Any] = field(default_factory=dict)


def new_request_id(prefix: str = "ek") -> str:
    """A fresh unique request id."""
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


# Fixed, so a caller's id always maps to the same UUID (a resumed run sends the same ids again).
_ID_NAMESPACE = uuid.UUID("6f0c1d2e-9a4b-4c3d-8e5f-0a1b2c3d4e5f")


def uuid_request_id(request_id: str) -> str:
    """`request_id` itself when it is a UUID, else the UUID derived from it (uuid5, deterministic)."""
    return request_id if is_uuid(request_id) else str(uuid.uuid5(_ID_NAMESPACE, request_id))


class ChatClient:
    """Sends chat requests to one OpenAI-compatible server through the official `openai` SDK."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        clock: Clock | None = None,
        uuid_request_ids: bool = False,
    ) -> None:
        self.base_url = base_url
        self.model = model
        self.clock = clock or Clock()
        # Servers behind starlette-context (llama-cpp-python) answer HTTP 400 to an X-Request-Id that is not a
        # UUID; then the id sent, and recorded as `request_id`, is a UUID and the caller's id is `request_label`.
        self.uuid_request_ids = uuid_request_ids
        self.preflight: Any = None  # what the preflight found (evalkit.preflight.CheckResult), set by connect
        # `t_sent` is stamped by the HTTP library's hooks (`_on_request`), when the request's headers are in the
        # socket: the SDK's own request building (about 1 ms, more on a busy client) is the client's cost, not
        # the server's latency.
        self._handed_over: dict[str, float] = {}
        self._oai = openai.AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or "EMPTY",
            max_retries=0,  # a retry would hide exactly the failures we count
            timeout=900.0,
            http_client=openai.DefaultAsyncHttpxClient(event_hooks={"request": [self._on_request]},
                                                       limits=_pool_limits()),
        )

    async def _on_request(self, request: Any) -> None:
        rid = request.headers.get("x-request-id")
        if not rid:
            return
        self._handed_over[rid] = self.clock.now()

        # The HTTP library yields to the event loop before it writes; its trace hook tells when the request's
        # headers are actually in the socket, which is when the server can first see it.
        async def trace(name: str, info: dict[str, Any]) -> None:
            if name.endswith("send_request_headers.complete"):
                self._handed_over[rid] = self.clock.now()

        request.extensions["trace"] = trace

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._oai.close()

    async def __aenter__(self) -> "ChatClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def chat(
        self,
        request: ChatRequest,
        *,
        cancel_after_s: float | None = None,
        cancel_event: asyncio.Event | None = None,
        on_first_token: Callable[[float], None] | None = None,
    ) -> RequestRecord:
        """Stream one chat completion; cancel it (close the stream) after a delay or when the event is set.

        `on_first_token(t)` is called as the first token arrives (stress scenarios time other requests from it)."""
        rid = request.request_id or new_request_id()
        tags = dict(request.tags)
        if self.uuid_request_ids and not is_uuid(rid):
            tags["request_label"], rid = rid, uuid_request_id(rid)
        rec = RequestRecord(request_id=rid, t_sent=self.clock.now(), tags=tags)
        task = asyncio.ensure_future(self._stream(request, rec, on_first_token))
        timer = asyncio.ensure_future(asyncio.sleep(request.timeout_s))
        waiters: list[asyncio.Future[Any]] = [task, timer]
        if cancel_after_s is not None:
            left = max(0.0, cancel_after_s - (self.clock.now() - rec.t_sent))
            waiters.append(asyncio.ensure_future(asyncio.sleep(left)))
        if cancel_event is not None:
            waiters.append(asyncio.ensure_future(cancel_event.wait()))
        try:
            done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            # The caller was cancelled (Ctrl-C): close the stream, keep what we saw.
            await self._stop(task)
            self._finish(rec, "cancelled", "client interrupted")
            raise
        finally:
            for w in waiters[1:]:
                w.cancel()
        if task not in done:
            await self._stop(task)
            if timer in done:
                self._finish(rec, "timeout", f"no completion within {request.timeout_s:g} s")
            else:
                self._finish(rec, "cancelled", None)
        else:
            exc = task.exception()
            if exc is not None:  # _stream catches everything it expects; this is a bug guard
                self._finish(rec, "error", f"{type(exc).__name__}: {exc}")
        if rec.usage_source is None:
            self._fill_usage_from_chunks(rec)
        return rec

    async def _stop(self, task: asyncio.Future[Any]) -> None:
        task.cancel()
        try:
            await task
        except BaseException:  # noqa: BLE001 - the task's own outcome no longer matters
            pass

    def _finish(self, rec: RequestRecord, status: str, error: str | None) -> None:
        rec.status = status
        rec.error = error
        if rec.t_done is None:
            rec.t_done = self.clock.now()

    @staticmethod
    def _fill_usage_from_chunks(rec: RequestRecord) -> None:
        # Documented fallback: without `usage`, one content/reasoning chunk counts as one token, which holds
        # for llama.cpp and vLLM's default streaming; prompt tokens stay unknown.
        if rec.content_chunks or rec.reasoning_chunks:
            rec.completion_tokens = rec.content_chunks + rec.reasoning_chunks
            rec.usage_source = "chunks"

    async def _stream(self, request: ChatRequest, rec: RequestRecord,
                      on_first_token: Callable[[float], None] | None = None) -> None:
        clock = self.clock
        body: dict[str, Any] = dict(request.extra_body)
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": request.messages,
            "stream": True,
            "stream_options": {"include_usage": True},
            "extra_headers": {"X-Request-Id": rec.request_id},
            "extra_body": body,
        }
        if request.max_tokens is not None:
            kwargs["max_tokens"] = request.max_tokens
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        content: list[str] = []
        reasoning: list[str] = []
        try:
            while True:
                try:
                    await self._attempt(kwargs, rec, content, reasoning, on_first_token)
                    break
                except openai.APIConnectionError as e:
                    if not _closed_before_answering(e, rec) or rec.connection_retries >= 1:
                        raise
                    # The server closed a pooled keep-alive connection as the request went out (llama.cpp does
                    # this now and then): the request never reached it, so sending it again is safe. Counted.
                    rec.connection_retries += 1
            rec.t_done = clock.now()
            if rec.finish_reason is None:
                rec.status, rec.error = "error", "stream ended without a finish_reason (broken stream)"
        except openai.APITimeoutError as e:
            rec.status, rec.error = "timeout", f"APITimeoutError: {e}"
        except openai.APIStatusError as e:
            rec.status, rec.http_status = "error", e.status_code
            sent = {**body, **{k: v for k, v in kwargs.items() if k not in ("extra_headers", "extra_body")}}
            rec.error = describe(e.status_code, _body_text(e), sent, rec.request_id)
        except (openai.APIError, StreamError) as e:  # connection errors, error events in the stream
            cause = e.__cause__ or e.__context__
            why = f" ({type(cause).__name__}: {_short(str(cause), 200)})" if cause is not None else ""
            rec.status, rec.error = "error", f"{type(e).__name__}: {_short(str(e))}{why}"
        except Exception as e:  # noqa: BLE001 - a stream broken mid-way surfaces as the HTTP library's own error
            rec.status, rec.error = "error", f"{type(e).__name__}: {_short(str(e)) or 'stream broken'}"
        finally:
            rec.t_sent = self._handed_over.pop(rec.request_id, rec.t_sent)
            if rec.t_done is None and rec.status != "ok":
                rec.t_done = clock.now()
            text = "".join(content)
            if reasoning:
                rec.content, rec.reasoning = text, "".join(reasoning)
            else:
                rec.reasoning, rec.content = split_inline_reasoning(text)

    async def _attempt(self, kwargs: dict[str, Any], rec: RequestRecord, content: list[str],
                       reasoning: list[str], on_first_token: Callable[[float], None] | None = None) -> None:
        clock = self.clock
        rec.t_sent = clock.now()
        self._handed_over.pop(rec.request_id, None)
        # The SDK sends the request and turns HTTP errors into exceptions; the event stream itself is read line by
        # line and parsed with json, so each chunk is stamped as its bytes arrive rather than after a model object
        # was built for it (which, with several streams in flight, queues chunks behind each other's parsing).
        async with self._oai.chat.completions.with_streaming_response.create(**kwargs) as response:
            rec.t_sent = self._handed_over.pop(rec.request_id, rec.t_sent)
            rec.t_first_byte = clock.now()
            rec.http_status = response.status_code
            async for line in response.iter_lines():
                now = clock.now()
                data = _sse_data(line)
                if data is None:
                    continue
                if data == "[DONE]":
                    continue  # read on to the end of the body, so the connection goes back to the pool
                _take_chunk(rec, json.loads(data), now, content, reasoning)
                if on_first_token is not None and rec.t_first_token is not None:
                    on_first_token(rec.t_first_token)
                    on_first_token = None

    async def list_models(self) -> list[str]:
        """Model ids from `GET /v1/models`, in the server's order."""
        page = await self._oai.models.list()
        return [m.id for m in page.data]


# llama.cpp and uvicorn-based servers (vLLM, SGLang, FastLLM) close an idle keep-alive connection after 5 s, the
# same as the HTTP library's default expiry: a request sent on a connection the server is closing at that moment
# fails with "Connection error" though the server is fine. Dropping idle connections sooner avoids the race.
KEEPALIVE_EXPIRY_S = 2.0


def _pool_limits() -> Any:
    """The SDK's connection limits with a keep-alive expiry shorter than common servers' idle timeout."""
    limits = openai._constants.DEFAULT_CONNECTION_LIMITS  # noqa: SLF001 - an instance of the SDK's HTTP library
    return type(limits)(max_connections=limits.max_connections,
                        max_keepalive_connections=limits.max_keepalive_connections,
                        keepalive_expiry=KEEPALIVE_EXPIRY_S)


def _closed_before_answering(error: Exception, rec: RequestRecord) -> bool:
    """Whether the server hung up on the request before a single byte of response (a stale pooled connection)."""
    cause = error.__cause__ or error.__context__
    return rec.t_first_byte is None and "without sending a response" in str(cause)


class StreamError(Exception):
    """An error event inside an event stream (the server gave up after the HTTP status was sent)."""


def _sse_data(line: str) -> str | None:
    """The payload of an SSE `data:` line; None for comments, blank lines and other fields."""
    if not line.startswith("data:"):
        return None
    return line[5:].strip()


def _take_chunk(rec: RequestRecord, chunk: dict[str, Any], now: float, content: list[str],
                reasoning: list[str]) -> None:
    """Fold one parsed `chat.completion.chunk` into the record."""
    if chunk.get("error") and not chunk.get("choices"):
        err = chunk["error"]
        raise StreamError(err.get("message", str(err)) if isinstance(err, dict) else str(err))
    if isinstance(chunk.get("timings"), dict):  # llama.cpp's own timing figures
        rec.server_timings = chunk["timings"]
    usage = chunk.get("usage")
    if isinstance(usage, dict):
        rec.prompt_tokens = usage.get("prompt_tokens")
        rec.completion_tokens = usage.get("completion_tokens")
        rec.usage_source = "server"
    for choice in chunk.get("choices") or []:
        delta = choice.get("delta") or {}
        text = delta.get("content")
        # Servers disagree on the field: vLLM/SGLang/llama.cpp use `reasoning_content`, newer vLLM and
        # OpenRouter-style servers use `reasoning`.
        think = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(think, str) and think:
            reasoning.append(think)
            rec.reasoning_chunks += 1
        else:
            think = None
        if isinstance(text, str) and text:
            content.append(text)
            rec.content_chunks += 1
        else:
            text = None
        if text or think:
            rec.chunk_times.append(now)
            if rec.t_first_token is None:
                rec.t_first_token = now
        if choice.get("finish_reason"):
            rec.finish_reason = choice["finish_reason"]


def _body_text(error: openai.APIStatusError) -> str:
    """The error response's body as the server sent it (the SDK has read it before raising)."""
    try:
        return error.response.text
    except Exception:  # noqa: BLE001 - a body that cannot be read is reported as empty
        return ""


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
