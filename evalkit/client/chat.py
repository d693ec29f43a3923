"""A timed streaming chat client: one request in, one `RequestRecord` out, never an exception.

Timing follows the lessons of vLLM's serve benchmark, done better: one clock, the first token stamped when a
chunk that actually carries text (content or reasoning) arrives, not on the role-only or empty first chunk,
and every chunk's arrival kept so rates are computed from raw samples later. The request goes out on
`evalkit.client.http_stream`: the send is stamped right before the socket write, and each chunk is stamped with the
kernel's receive time of its bytes (plain http on Linux; elsewhere when its callback reads them), so neither stamp
waits behind other ready tasks or a busy loop.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evalkit.client.chunk_parse import StreamError, take_payload
from evalkit.client.http_errors import describe, is_uuid
from evalkit.client.http_stream import APIConnectionError, ClosedBeforeAnswering, HttpPool, build_request
from evalkit.client.thinking_text import split_inline_reasoning
from evalkit.clock import Clock
from evalkit.redact import known_forms, scrub, scrub_known
from evalkit.runs.records import RequestRecord


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
    """Sends chat requests to one OpenAI-compatible server and times them (evalkit's own lean HTTP/1.1 transport)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        clock: Clock | None = None,
        uuid_request_ids: bool = False,
        omit_fields: frozenset[str] = frozenset(),
        standing_body: dict[str, Any] | None = None,
    ) -> None:
        self.base_url = base_url
        self.model = model
        # The server profile's `extra_body`, sent with every request under what the request itself adds.
        self.standing_body: dict[str, Any] = dict(standing_body or {})
        self.clock = clock or Clock()
        # Servers behind starlette-context (llama-cpp-python) answer HTTP 400 to an X-Request-Id that is not a
        # UUID; then the id sent, and recorded as `request_id`, is a UUID and the caller's id is `request_label`.
        self.uuid_request_ids = uuid_request_ids
        # Fields the preflight saw this server refuse (evalkit.client.field_support): never sent, whoever asks for them.
        # `header:X-Request-Id` drops the request-id header; the id is still recorded as `request_id`.
        self.omit_fields = frozenset(omit_fields)
        self.preflight: Any = None  # what the preflight found (evalkit.client.probe.CheckResult), set by connect
        # what the server said about itself (evalkit.evidence.server_identity), set by connect
        self.identity: Any = None
        # The openai SDK is not on this path: under load its stack (httpx, httpcore, anyio) cost ~105 µs of CPU a
        # chunk and stamped the send only after every other ready task ran. Here `t_sent` is taken with no await
        # before the socket write and each chunk is parsed in the connection's callback as its bytes arrive.
        self._pool = HttpPool(base_url, self.clock, KEEPALIVE_EXPIRY_S)
        self._headers = {
            "Content-Type": "application/json",
            "Authorization": f"Bearer {api_key or 'EMPTY'}",
            "User-Agent": "evalkit",
        }
        # What a server sends back is scrubbed of the key before it reaches a record (error texts also of any
        # credential-looking value; answers only of the key itself, so their own code stays as written).
        self._secrets = (api_key,) if api_key else ()
        self._key_forms = known_forms(self._secrets)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._pool.aclose()

    async def __aenter__(self) -> ChatClient:
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
        label = request.request_id or new_request_id()
        tags = dict(request.tags)
        rid = self.wire_id(label)
        if rid != label:
            tags["request_label"] = label
        rec = RequestRecord(request_id=rid, t_sent=self.clock.now(), tags=tags)
        loop = asyncio.get_running_loop()
        task = loop.create_task(self._stream(request, rec, on_first_token))
        # What ends the wait: the stream ("done"), its time limit ("timeout") or a cancel ("cancelled"). Timers and
        # callbacks on one future, not a sleeping task per limit and asyncio.wait (half the loop work per request).
        ended: asyncio.Future[str] = loop.create_future()

        def end(why: str) -> None:
            if not ended.done():
                ended.set_result(why)

        task.add_done_callback(lambda _: end("done"))
        timers = [loop.call_later(request.timeout_s, end, "timeout")]
        if cancel_after_s is not None:
            timers.append(loop.call_later(max(0.0, cancel_after_s - (self.clock.now() - rec.t_sent)), end, "cancelled"))
        watcher = None
        if cancel_event is not None:
            watcher = loop.create_task(cancel_event.wait())
            watcher.add_done_callback(lambda _: end("cancelled"))
        try:
            why = await ended
        except asyncio.CancelledError:
            # The caller was cancelled (Ctrl-C): close the stream, keep what we saw.
            await self._stop(task)
            self._finish(rec, "cancelled", "client interrupted")
            raise
        finally:
            for timer in timers:
                timer.cancel()
            if watcher is not None:
                watcher.cancel()
        if why != "done":
            await self._stop(task)
            if why == "timeout":
                self._finish(rec, "timeout", f"no completion within {request.timeout_s:g} s")
            else:
                self._finish(rec, "cancelled", None)
        else:
            exc = task.exception()
            if exc is not None:  # _stream catches everything it expects; this is a bug guard
                self._finish(rec, "error", f"{type(exc).__name__}: {exc}")
        if rec.usage_source is None:
            self._fill_usage_from_chunks(rec)
        self._scrub(rec)
        return rec

    def _scrub(self, rec: RequestRecord) -> None:
        if rec.error:
            rec.error = scrub(rec.error, self._secrets)
        if self._key_forms:
            rec.content = scrub_known(rec.content, self._key_forms) if rec.content else rec.content
            rec.reasoning = scrub_known(rec.reasoning, self._key_forms) if rec.reasoning else rec.reasoning

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

    def _request_body(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body, as the openai SDK built it: its fields, then the standing body and the request's
        `extra_body` merged over them (the request's own fields last)."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": request.messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        body.update(self.standing_body)
        body.update(request.extra_body)
        for name in self.omit_fields.intersection(body):
            del body[name]
        return body

    async def _stream(
        self, request: ChatRequest, rec: RequestRecord, on_first_token: Callable[[float], None] | None = None
    ) -> None:
        clock = self.clock
        body = self._request_body(request)
        wire = build_request(
            self._pool.origin,
            "POST",
            "/chat/completions",
            self._headers
            if "header:X-Request-Id" in self.omit_fields
            else {**self._headers, "X-Request-Id": rec.request_id},
            json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode(),
        )
        content: list[str] = []
        reasoning: list[str] = []
        events: _EventStream | None = None
        try:
            while True:
                events = _EventStream(rec, content, reasoning, on_first_token)
                try:
                    rec.read_lag_s = await self._pool.request(wire, events, _stamp(rec))
                    if rec.read_lag_s is None:  # stamped when read, not by the kernel: no bound to give
                        rec.first_token_stamp_bound_s = None
                    rec.t_done = clock.now()  # the answer is in; parsing what was kept is not part of it
                    events.flush()
                    break
                except ClosedBeforeAnswering:
                    if rec.t_first_byte is not None or rec.connection_retries >= 1:
                        raise
                    # The server closed a pooled keep-alive connection as the request went out (llama.cpp does
                    # this now and then): the request never reached it, so sending it again is safe. Counted.
                    rec.connection_retries += 1
            if events.error_body is not None:
                rec.status = "error"
                text = b"".join(events.error_body).decode("utf-8", errors="replace")
                rec.error = describe(rec.http_status or 0, text, body, rec.request_id, self._secrets)
            elif rec.finish_reason is None and not events.got_data:
                # What llama-cpp-python sends for a prompt longer than its context, and for a stream it ends before
                # the first event when another request arrives. "without a finish_reason" is what stress's checks
                # read as a killed stream.
                rec.status, rec.error = (
                    "error",
                    (
                        "stream ended without a finish_reason and without one event (HTTP 200, empty stream: a prompt "
                        "longer than the server's context, or a server that ends a stream when another request arrives)"
                    ),
                )
            elif rec.finish_reason is None:
                rec.status, rec.error = "error", "stream ended without a finish_reason (broken stream)"
        except (APIConnectionError, StreamError) as e:  # connection errors, error events in the stream
            cause = e.__cause__ or e.__context__
            why = f" ({type(cause).__name__}: {_short(str(cause), 200)})" if cause is not None else ""
            rec.status, rec.error = "error", f"{type(e).__name__}: {_short(str(e))}{why}"
        except Exception as e:  # noqa: BLE001 - a stream broken mid-way, a body that is not JSON ...
            rec.status, rec.error = "error", f"{type(e).__name__}: {_short(str(e)) or 'stream broken'}"
        finally:
            if events is not None:  # a stream cut short or cancelled keeps what it got
                try:
                    events.fold()
                except StreamError as e:
                    if rec.status == "ok":
                        rec.status, rec.error = "error", f"StreamError: {_short(str(e))}"
            if rec.t_done is None and rec.status != "ok":
                rec.t_done = clock.now()
            text = "".join(content)
            if reasoning:
                rec.content, rec.reasoning = text, "".join(reasoning)
            else:
                rec.reasoning, rec.content = split_inline_reasoning(text)
            split_answer_tokens(rec, content, bool(reasoning))

    def wire_id(self, request_id: str) -> str:
        """The id sent (and recorded as `request_id`) for a caller's id: a derived UUID for a server that takes
        only UUIDs, else the id itself."""
        return uuid_request_id(request_id) if self.uuid_request_ids else request_id

    async def list_models(self) -> list[str]:
        """Model ids from `GET /v1/models`, in the server's order."""
        sink = _Collect()
        wire = build_request(self._pool.origin, "GET", "/models", dict(self._headers), b"")
        await self._pool.request(wire, sink, lambda t: None)
        text = b"".join(sink.body).decode("utf-8", errors="replace")
        if not 200 <= sink.status < 300:
            raise HttpStatusError(sink.status, describe(sink.status, text, secrets=self._secrets))
        page = json.loads(text)
        models = page.get("data") if isinstance(page, dict) else None
        return [m["id"] for m in models if isinstance(m, dict) and isinstance(m.get("id"), str)] if models else []


# llama.cpp and uvicorn-based servers (vLLM, SGLang, FastLLM) close an idle keep-alive connection after 5 s: a
# request sent on a connection the server is closing at that moment fails though the server is fine. Dropping
# idle connections sooner avoids the race.
KEEPALIVE_EXPIRY_S = 2.0


class HttpStatusError(Exception):
    """A non-2xx answer to a request other than a chat stream (whose errors go into its record)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status


def _stamp(rec: RequestRecord) -> Callable[[float], None]:
    """Where the transport puts the send stamp of each attempt."""

    def on_sent(t: float) -> None:
        rec.t_sent = t

    return on_sent


MAX_COLLECT_BYTES = 8 * 1024 * 1024


class _Collect:
    """A sink that keeps a whole (small) response."""

    def __init__(self) -> None:
        self.status = 0
        self.body: list[bytes] = []

    def on_head(self, status: int, headers: dict[str, str], now: float) -> None:
        self.status = status

    def on_data(self, data: bytes, now: float, late: float = 0.0) -> None:
        self.body.append(data)
        if sum(map(len, self.body)) > MAX_COLLECT_BYTES:
            raise StreamError(f"an answer over the {MAX_COLLECT_BYTES}-byte limit")


# Events parsed together after the first token (see _EventStream).
FOLD_EVERY = 16
# An SSE event over this is an error for its request (a token's event is ~300 bytes, a whole answer in one event a
# few tens of KB); without a bound a server's endless line would be held in memory whole.
MAX_EVENT_BYTES = 1024 * 1024
# Of a non-2xx answer only the start is kept (its description shows 200 characters of it).
MAX_ERROR_BODY_BYTES = 64 * 1024


class _EventStream:
    """Folds an event stream into the record, each chunk stamped with when its bytes arrived.

    Until the first token, each event is parsed as it arrives (the first-token time and its callback are exact and
    prompt, an error event is seen at once). After it, events are kept as they came, with their stamps, and parsed
    `FOLD_EVERY` at a time and at the end (`fold`): the same record, with the JSON parsed in short tight loops
    rather than one event per read on a busy loop. Not all at the end: hundreds of streams ending together then
    held the loop for 100+ ms (seen at 512 streams), and tokens that wait unread share one kernel stamp.
    A non-2xx answer's body is kept instead (`error_body`), to be described once it is complete."""

    __slots__ = ("_kept", "_now", "_pending", "_prev", "content", "error_body", "on_first_token", "reasoning", "rec")

    def __init__(
        self,
        rec: RequestRecord,
        content: list[str],
        reasoning: list[str],
        on_first_token: Callable[[float], None] | None,
    ) -> None:
        self.rec, self.content, self.reasoning, self.on_first_token = rec, content, reasoning, on_first_token
        self.error_body: list[bytes] | None = None
        self._pending = b""
        self._now = 0.0
        self._prev = 0.0  # until the first token: the stamp of the read before the one in hand (0.0: none yet)
        self._kept: list[tuple[bytes, float]] | None = None  # (line, arrival) after the first token

    def on_head(self, status: int, headers: dict[str, str], now: float) -> None:
        self.rec.http_status = status
        if 200 <= status < 300:
            self.rec.t_first_byte = now
        else:
            self.error_body = []

    def on_data(self, data: bytes, now: float, late: float = 0.0) -> None:
        if self.error_body is not None:
            if sum(map(len, self.error_body)) < MAX_ERROR_BODY_BYTES:
                self.error_body.append(data[:MAX_ERROR_BODY_BYTES])
            return
        self._now = now
        if self._kept is not None:  # after the first token: the common case
            if self._pending:
                data = self._pending + data
            elif data.endswith(b"\n\n") and data.count(b"\n") == 2:
                self._line(data, now)  # one whole event, as a server sends a token: no split
                return
            lines = data.split(b"\n")
            self._pending = lines.pop()
            for line in lines:
                self._line(line, now)
            if len(self._pending) > MAX_EVENT_BYTES:
                raise StreamError(f"an SSE event over the {MAX_EVENT_BYTES}-byte limit")
            return
        self._before_first(data, now, late)

    def _before_first(self, data: bytes, now: float, late: float) -> None:
        """`on_data` until the first token: also notes whether the read that carried it held later bytes too (then
        its stamp may be theirs: `first_token_stamp_bound_s`, the read's own lateness, at most the time since the
        read before it)."""
        prev, self._prev = self._prev, now
        if not prev:  # the body's first bytes: before them, the head's read (if it was another) or the send
            first_byte = self.rec.t_first_byte
            prev = first_byte if first_byte is not None and first_byte < now else self.rec.t_sent
        if self._pending:
            data = self._pending + data
        lines = data.split(b"\n")
        self._pending = lines.pop()
        if len(self._pending) > MAX_EVENT_BYTES or any(len(line) > MAX_EVENT_BYTES for line in lines):
            raise StreamError(f"an SSE event over the {MAX_EVENT_BYTES}-byte limit")
        rec = self.rec
        for i, line in enumerate(lines):
            self._line(line, now)
            if rec.t_first_token is not None and self._kept is not None:
                later = self._pending or any(lines[i + 1 :])
                # Bytes share a stamp only while they wait unread: a read `late` after its newest bytes came from a
                # client that reacts within about that long, so the first token came at most about that much before
                # them. The whole wait since the read before (a prefill: seconds) bounds nothing a prompt client
                # could have merged.
                rec.first_token_stamp_bound_s = min(max(0.0, now - prev), max(0.0, late)) if later else 0.0
                for rest in lines[i + 1 :]:
                    self._line(rest, now)
                return

    @property
    def got_data(self) -> bool:
        """Whether any byte of a 2xx body came (`on_data` stamps every piece)."""
        return self._now != 0.0

    def flush(self) -> None:
        """The last line, when the body did not end with a line break; then the kept events."""
        if self._pending and self.error_body is None:
            line, self._pending = self._pending, b""
            self._line(line, self._now)
        self.fold()

    def fold(self) -> None:
        """Parse the events kept since the first token into the record, in arrival order (raises `StreamError` at an
        error event, as parsing it on arrival would have)."""
        kept, self._kept = self._kept, None
        if kept:
            self._parse(kept)

    def _parse(self, kept: list[tuple[bytes, float]]) -> None:
        rec, content, reasoning = self.rec, self.content, self.reasoning
        for line, now in kept:
            if line.startswith(b"data:"):  # _sse_data, inline: this loop runs once per token
                payload = line[5:].strip()
                if payload and payload != b"[DONE]":
                    take_payload(rec, payload, now, content, reasoning)

    def _line(self, line: bytes, now: float) -> None:
        kept = self._kept
        if kept is not None:  # after the first token: kept, and parsed FOLD_EVERY at a time
            if line:
                kept.append((line, now))
                if len(kept) >= FOLD_EVERY:
                    self._kept = []
                    self._parse(kept)
            return
        payload = _sse_data(line)
        if not payload or payload == b"[DONE]":
            return  # read on to the end of the body, so the connection goes back to the pool
        rec = self.rec
        take_payload(rec, payload, now, self.content, self.reasoning)
        if rec.t_first_token is not None:
            self._kept = []
            if self.on_first_token is not None:
                callback, self.on_first_token = self.on_first_token, None
                callback(rec.t_first_token)


def _sse_data(line: bytes) -> bytes | None:
    """The payload of an SSE `data:` line; None for comments, blank lines and other fields."""
    if not line.startswith(b"data:"):
        return None
    return line[5:].strip()


def split_answer_tokens(rec: RequestRecord, content: list[str], separate_reasoning: bool) -> None:
    """Set the first answer token's time and the reasoning/answer token counts once the stream is done.

    Reasoning in its own field: the answer starts with the first content chunk (set as chunks arrive). Inline
    (`<think>...</think>` in the content): the answer starts in the chunk holding the first character after the
    block, so the time and counts are found from the content chunks' lengths (one chunk per token on most servers).
    """
    if not separate_reasoning and rec.reasoning is not None:
        # Content chunks and chunk_times align here: with no reasoning field every timed chunk carried content.
        start = len("".join(content)) - len(rec.content)
        rec.t_first_answer_token = None
        pos, answer_chunk = 0, None
        for i, piece in enumerate(content):
            pos += len(piece)
            if pos > start and rec.content:
                answer_chunk = i
                break
        if answer_chunk is not None and answer_chunk < len(rec.chunk_times):
            rec.t_first_answer_token = rec.chunk_times[answer_chunk]
        reasoning_chunks = answer_chunk if answer_chunk is not None else len(content)
    else:
        reasoning_chunks = rec.reasoning_chunks
    if rec.token_split_source != "server":
        rec.reasoning_tokens = reasoning_chunks
        rec.token_split_source = "chunks"
    total = rec.completion_tokens if rec.completion_tokens is not None else rec.content_chunks + rec.reasoning_chunks
    rec.answer_tokens = max(0, total - rec.reasoning_tokens) if rec.reasoning_tokens is not None else None


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
