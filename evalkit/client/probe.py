"""The essential probe: evalkit's own request sent before bench, capability and stress (and first in `evalkit check`),
and what each optional field gets; how the client must talk to this server.

The essential probe sends evalkit's own request (streaming, `stream_options.include_usage`, `X-Request-Id`, the
profile's extra body); when the server refuses it, variants find the part it refuses (a non-UUID request id, a body
field) or show it refuses every request. Every probe is a real request over HTTP; a probe that cannot tell says so.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict

from evalkit.client import auxiliary, field_cache
from evalkit.client.field_support import FieldSupport, FieldSupportJson, ProbeReply, length_fields, probe_fields
from evalkit.client.http_errors import describe
from evalkit.client.identity_json import ServerIdentity
from evalkit.redact import scrub

PROBE_PROMPT = "Reply with just the word OK."
ALL_COMMANDS = ("bench", "capability", "stress")


@dataclass
class Reply:
    """What one probe request got back."""

    status: int | None
    body: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    content: str = ""
    reasoning: str = ""
    chunks: int = 0
    usage: dict[str, Any] | None = None
    timings: bool = False
    finish_reason: str | None = None
    elapsed_s: float = 0.0
    error: str | None = None  # connection-level failure
    t_first_chunk: float | None = None  # perf_counter() when the first text chunk was read
    t_end: float | None = None  # perf_counter() when the stream ended (or broke)

    @property
    def ok(self) -> bool:
        """HTTP 200 with at least one text chunk and a finish_reason."""
        return self.status == 200 and self.chunks > 0 and self.finish_reason is not None


@dataclass(frozen=True)
class Row:
    """One line of the support table: `supported` is True, False or None (cannot tell)."""

    name: str
    supported: bool | None
    detail: str
    needed_by: tuple[str, ...] = ()
    fix: str | None = None


class RowJson(TypedDict):
    """One row of `check.json` (a `Row`), in its field order."""

    name: str
    supported: bool | None
    detail: str
    needed_by: tuple[str, ...]
    fix: str | None


class CheckJson(TypedDict):
    """What `check.json` holds of a `CheckResult` (`CheckResult.to_json`), in its field order."""

    base_url: str
    model: str
    rows: list[RowJson]
    uuid_request_ids: bool
    refused_fields: list[str]
    rejects_everything: str | None
    fields: FieldSupportJson | None
    server_kind: str | None


@dataclass
class CheckResult:
    """Every row, how the client must talk to this server, and the server's words when it refuses everything."""

    base_url: str
    model: str
    rows: list[Row] = field(default_factory=list)
    uuid_request_ids: bool = False
    refused_fields: list[str] = field(default_factory=list)
    rejects_everything: str | None = None
    # each optional field: accepted, ignored or refused (evalkit.client.field_support)
    fields: FieldSupport | None = None
    server_kind: str | None = None  # evalkit.evidence.server_kind: whose advice the rows give
    unreachable: str | None = None  # no connection at all for evalkit's request (the server went away): why
    secrets: tuple[str, ...] = field(default=(), repr=False)  # scrubbed from every server text kept

    @property
    def omit_fields(self) -> frozenset[str]:
        """What the client must not send: fields refused in evalkit's request or when probed alone."""
        return frozenset(self.refused_fields) | frozenset(self.fields.refused if self.fields else ())

    def missing(self, commands: tuple[str, ...] = ALL_COMMANDS) -> list[Row]:
        """Rows the given commands need that the server does not support."""
        return [r for r in self.rows if r.supported is False and set(r.needed_by) & set(commands)]

    def to_json(self) -> CheckJson:
        """What `check.json` holds."""
        return {
            "base_url": self.base_url,
            "model": self.model,
            "rows": [
                {"name": r.name, "supported": r.supported, "detail": r.detail, "needed_by": r.needed_by, "fix": r.fix}
                for r in self.rows
            ],
            "uuid_request_ids": self.uuid_request_ids,
            "refused_fields": list(self.refused_fields),
            "rejects_everything": self.rejects_everything,
            "fields": self.fields.to_json() if self.fields is not None else None,
            "server_kind": self.server_kind,
        }


async def chat_probe(
    http: auxiliary.ClientSession,
    base_url: str,
    body: dict[str, Any],
    headers: dict[str, str] | None = None,
    on_first_chunk: Callable[[], None] | None = None,
) -> Reply:
    """Send one streaming chat request and read it to the end.

    Sent once more when the connection was dropped before any answer: llama-server closes idle pooled keep-alive
    connections under the client (evalkit's client does the same; a probe that did not would report a second
    request as failed).
    """
    reply = await _chat_once(http, base_url, body, headers, on_first_chunk)
    if reply.status is None and reply.error is not None and reply.error.startswith(_DROPPED):
        reply = await _chat_once(http, base_url, body, headers, on_first_chunk)
    return reply


# How aiohttp reports a pooled connection the server had closed: before any answer, so nothing was served.
_DROPPED = ("ServerDisconnectedError", "ClientOSError")


async def _chat_once(
    http: auxiliary.ClientSession,
    base_url: str,
    body: dict[str, Any],
    headers: dict[str, str] | None,
    on_first_chunk: Callable[[], None] | None,
) -> Reply:
    start = time.perf_counter()
    reply = Reply(status=None)
    try:
        async with http.post(base_url.rstrip("/") + "/chat/completions", json=body, headers=headers or {}) as resp:
            reply.status, reply.headers = resp.status, {k.lower(): v for k, v in resp.headers.items()}
            if resp.status != 200:
                # Scrubbed whole, before any excerpt of it is cut (no half of a key survives a cut).
                reply.body = scrub(await auxiliary.read_text(resp), _session_secrets(http))
                return reply
            async for raw in _lines(resp):
                # Strict, as the measured stream reads it: invalid UTF-8 is an error here too (UnicodeDecodeError).
                line = raw.decode().strip()
                if not line.startswith("data:") or line[5:].strip() == "[DONE]":
                    continue
                _take(reply, auxiliary.parse_json(line[5:]))
                if reply.chunks and reply.t_first_chunk is None:
                    reply.t_first_chunk = time.perf_counter()
                    if on_first_chunk is not None:
                        on_first_chunk()
    except asyncio.TimeoutError:
        total = http.timeout.total
        reply.error = f"TimeoutError: no complete answer within {total:g} s" if total else "TimeoutError"
    except (auxiliary.ClientError, ValueError) as e:
        # Kept with its HTTP status: a stream cut after a 200 (llama-cpp-python ends one when another request
        # arrives) is not the same as a server that never answered.
        reply.error = f"{type(e).__name__}: {e}"
    reply.t_end = time.perf_counter()
    reply.elapsed_s = reply.t_end - start
    return reply


# A probe's stream: each SSE event at most the measured stream's bound, the whole answer at most a server body's
# (a probe asks for a handful of tokens; docs/conventions.md "Bounds").
MAX_EVENT_BYTES = 1024 * 1024
MAX_STREAM_BYTES = auxiliary.MAX_BODY_BYTES


async def _lines(resp: auxiliary.ClientResponse) -> AsyncIterator[bytes]:
    """The stream's lines, read piece by piece: BodyTooLarge past either bound (never a line read whole)."""
    buf, total = bytearray(), 0
    async for piece in resp.content.iter_any():
        total += len(piece)
        if total > MAX_STREAM_BYTES:
            raise auxiliary.BodyTooLarge(f"a streamed answer over the {MAX_STREAM_BYTES}-byte limit")
        buf += piece
        while True:
            nl = buf.find(b"\n")
            if nl < 0:
                break
            yield bytes(buf[:nl])
            del buf[: nl + 1]
        if len(buf) > MAX_EVENT_BYTES:
            raise auxiliary.BodyTooLarge(f"an SSE event over the {MAX_EVENT_BYTES}-byte limit")
    if buf:
        yield bytes(buf)


def _session_secrets(http: auxiliary.ClientSession) -> tuple[str, ...]:
    auth = http.headers.get("Authorization", "")
    return (auth[len("Bearer ") :],) if auth.startswith("Bearer ") else ()


def _take(reply: Reply, chunk: Any) -> None:
    if not isinstance(chunk, dict):
        return  # not a chunk: an answer of another shape reads as no answer
    if isinstance(chunk.get("usage"), dict):
        reply.usage = chunk["usage"]
    if isinstance(chunk.get("timings"), dict):
        reply.timings = True
    choices = chunk.get("choices")
    for choice in choices if isinstance(choices, list) else []:
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta")
        delta = delta if isinstance(delta, dict) else {}
        think = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(think, str) and think:
            reply.reasoning += think
            reply.chunks += 1
        if isinstance(delta.get("content"), str) and delta["content"]:
            reply.content += delta["content"]
            reply.chunks += 1
        if choice.get("finish_reason"):
            reply.finish_reason = choice["finish_reason"]


def evalkit_body(
    model: str, extra_body: dict[str, Any], max_tokens: int, prompt: str = PROBE_PROMPT, system: str | None = None
) -> dict[str, Any]:
    """The body evalkit's client sends (extra body first, the client's own fields over it)."""
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    return {
        **extra_body,
        "model": model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": max_tokens,
        "temperature": 0.0,
    }


def probe_id() -> str:
    """A probe request's id: `preflight-` and 12 hex digits."""
    return f"preflight-{uuid.uuid4().hex[:12]}"


# A server that fails one request in three (the sim's fault tests do) still passes 8 tries but for 0.02% of the
# time; one that fails every request is told apart in a second: the probe asks for 4 tokens.
ESSENTIAL_TRIES = 8


async def essential(http: auxiliary.ClientSession, result: CheckResult, extra_body: dict[str, Any]) -> Reply:
    """Evalkit's own request; when refused, find what is refused. Fills the result's adaptations and rows."""
    body = evalkit_body(result.model, extra_body, 4)
    tries = 0
    while tries < ESSENTIAL_TRIES:
        tries += 1
        # A server error or a broken stream may be one bad moment (a faulty server fails some requests):
        # tried again; only a refusal (4xx) is taken apart below.
        reply = await chat_probe(http, result.base_url, body, {"X-Request-Id": probe_id()})
        if reply.ok or (reply.status is not None and 400 <= reply.status < 500):
            break
        if (reply.error or "").startswith(("TimeoutError", "BodyTooLarge")):
            break  # not one bad moment: a stream that does not end in --timeout-s, or one past its bound
    if reply.ok:
        result.rows.append(Row("evalkit's request", True, "accepted as sent", ALL_COMMANDS))
        return reply
    first = refusal_words(reply, body)
    if reply.status is None and (reply.error or "").startswith("ClientConnectorError"):
        result.unreachable = first  # nothing listens any more: not a refusal (exit 2, as an unreachable server)
    if reply.status is None or reply.status >= 500 or reply.status == 200:
        result.rejects_everything = first
        result.rows.append(
            Row(
                "evalkit's request",
                False,
                f"failed {tries} times: {first}" if tries > 1 else f"failed: {first}",
                ALL_COMMANDS,
                "look at the server's log",
            )
        )
        return reply
    uuid_reply = await chat_probe(http, result.base_url, body, {"X-Request-Id": str(uuid.uuid4())})
    if uuid_reply.ok:
        result.uuid_request_ids = True
        result.rows.append(
            Row(
                "evalkit's request",
                True,
                f"only with a UUID X-Request-Id ({first}); evalkit "
                "sends UUID ids, the caller's id kept as request_label",
                ALL_COMMANDS,
            )
        )
        return uuid_reply
    plain = {"model": result.model, "messages": body["messages"], "stream": True, "max_tokens": 4}
    plain_reply = await chat_probe(http, result.base_url, plain)
    if not plain_reply.ok:
        result.rejects_everything = refusal_words(plain_reply, plain)
        result.rows.append(
            Row(
                "evalkit's request",
                False,
                f"even a bare chat request is refused: {result.rejects_everything}",
                ALL_COMMANDS,
                "check --base-url and --model, and the server's log",
            )
        )
        return plain_reply
    # The bare request works: each optional field alone on it names the ones refused; evalkit then sends its
    # request without them (a strict server refuses what it does not know: the request must not fail for them).
    for name in [k for k in body if k not in plain]:
        trial = {**plain, name: body[name]}
        alone = await chat_probe(http, result.base_url, trial, {"X-Request-Id": str(uuid.uuid4())})
        if alone.status is not None and 400 <= alone.status < 500:
            result.refused_fields.append(name)
    kept = {k: v for k, v in body.items() if k not in result.refused_fields}
    adapted = plain_reply
    if result.refused_fields:
        adapted = await chat_probe(http, result.base_url, kept, {"X-Request-Id": probe_id()})
        if not adapted.ok:
            adapted = await chat_probe(http, result.base_url, kept, {"X-Request-Id": str(uuid.uuid4())})
            result.uuid_request_ids = adapted.ok
    if result.refused_fields and adapted.ok:
        fields_text = ", ".join(result.refused_fields)
        result.rows.append(
            Row(
                "evalkit's request",
                True,
                f"accepted without {fields_text} (refused: {first}); evalkit does not send {fields_text}",
                ALL_COMMANDS,
            )
        )
        return adapted
    fields_text = ", ".join(result.refused_fields) or "a combination of fields"
    result.rows.append(
        Row(
            "evalkit's request",
            False,
            f"refused ({first}); the server refuses {fields_text}",
            ALL_COMMANDS,
            f"remove {fields_text} from the profile's extra_body or thinking style",
        )
    )
    return plain_reply


def refusal_words(reply: Reply, body: dict[str, Any], secrets: tuple[str, ...] = ()) -> str:
    """The server's own words for a refusal, on one line (scrubbed of secrets)."""
    if reply.status is None:
        return scrub(reply.error or "no answer", secrets)
    if reply.status == 200:
        return scrub(
            f"HTTP 200 but {reply.chunks} text chunks and finish_reason {reply.finish_reason}"
            + (f" ({reply.error})" if reply.error else ""),
            secrets,
        )
    return describe(reply.status, reply.body, body, secrets=secrets)  # scrubbed before its cut


def scrubbed(result: CheckResult, api_key: str | None) -> CheckResult:
    """The result with the key scrubbed from every row: probe results quote the server (its refusals, its headers),
    scrubbed before they are printed or written."""
    keys = (api_key,)
    result.rows = [scrub_row(r, keys) for r in result.rows]
    if result.rejects_everything is not None:
        result.rejects_everything = scrub(result.rejects_everything, keys)
    result.refused_fields = [scrub(f, keys) for f in result.refused_fields]
    return result


def scrub_row(row: Row, keys: tuple[str | None, ...]) -> Row:
    """The row with the keys scrubbed from its detail and fix."""
    return replace(row, detail=scrub(row.detail, keys), fix=scrub(row.fix, keys) if row.fix else row.fix)


def probe_session(api_key: str | None, timeout_s: float) -> auxiliary.ClientSession:
    """The HTTP session probes are sent on: the key as a bearer token, one total timeout per request."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return auxiliary.session(headers, auxiliary.ClientTimeout(total=timeout_s))


def _cache_name(result: CheckResult) -> str:
    return f"{result.base_url.rstrip('/')} model={result.model}"


async def learn_fields(
    http: auxiliary.ClientSession,
    result: CheckResult,
    extra_body: dict[str, Any],
    identity: ServerIdentity | None = None,
    refresh: bool = False,
) -> FieldSupport:
    """Each optional field's support (evalkit.client.field_support): from the cache when fresh for this server's
    identity and it knows every field of the profile, else probed, then cached. Sets `result.fields`."""
    support = None if refresh else field_cache.load(_cache_name(result), identity)
    if support is not None and not set(extra_body) <= set(support.fields):
        support = None

    async def send(body: dict[str, Any], headers: dict[str, str]) -> ProbeReply:
        r = await chat_probe(http, result.base_url, body, headers)
        n = r.usage.get("completion_tokens") if r.usage else (r.chunks if r.status == 200 else None)
        return ProbeReply(
            r.status,
            refusal_words(r, body, result.secrets),
            r.ok,
            n,
            r.usage is not None,
            r.finish_reason,
            r.headers.get("x-request-id"),
        )

    if support is None:
        support = await probe_fields(send, result.model, extra_body, probe_id, result.uuid_request_ids)
        if all(v.status != "can't tell" for v in support.fields.values()):
            field_cache.store(_cache_name(result), identity, support)
    result.fields = support
    return support


async def quick_check(
    base_url: str,
    model: str,
    api_key: str | None,
    extra_body: dict[str, Any],
    timeout_s: float = 60.0,
    identity: ServerIdentity | None = None,
) -> CheckResult:
    """Evalkit's own request (and, when refused, its variants), then what each optional field gets: what a command
    needs before it starts."""
    result = CheckResult(base_url=base_url, model=model, secrets=(api_key,) if api_key else ())
    async with probe_session(api_key, timeout_s) as http:
        await essential(http, result, extra_body)
        if result.rejects_everything is None and all(r.supported is not False for r in result.rows):
            await learn_fields(http, result, extra_body, identity)
    return scrubbed(result, api_key)


GEN_PROMPT = "Count from 1 to 100, separated by commas."


def generation_body(
    result: CheckResult, extra_body: dict[str, Any], tokens: int, prompt: str = GEN_PROMPT
) -> dict[str, Any]:
    """A generation of `tokens` as the commands send it: a forced length where the server has one, no refused field."""
    forced, _ = length_fields(result.fields, tokens)
    body = {**evalkit_body(result.model, extra_body, tokens, prompt), **forced}
    return {k: v for k, v in body.items() if k not in result.omit_fields}


def probe_headers(result: CheckResult) -> dict[str, str]:
    """The request-id header a probe sends: a UUID where the server wants one."""
    return {"X-Request-Id": str(uuid.uuid4()) if result.uuid_request_ids else probe_id()}
