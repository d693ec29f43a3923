"""The preflight probes: what a server supports and how evalkit will talk to it (`evalkit check`, and quietly before
bench, capability and stress).

Every probe is a real request over HTTP; a probe that cannot tell says so. The essential one sends evalkit's own
request (streaming, `stream_options.include_usage`, `X-Request-Id`, the profile's extra body); when the server refuses
it, variants find the part it refuses (a non-UUID request id, a body field) or show it refuses every request.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable

import aiohttp

from evalkit import field_cache
from evalkit.field_support import REFUSED, FieldSupport, ProbeReply, length_fields, probe_fields
from evalkit.http_errors import describe
from evalkit.redact import scrub
from evalkit.thinking_text import split_inline_reasoning

PROBE_PROMPT = "Reply with just the word OK."
GEN_PROMPT = "Count from 1 to 100, separated by commas."
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


@dataclass
class CheckResult:
    """Every row, how the client must talk to this server, and the server's words when it refuses everything."""

    base_url: str
    model: str
    rows: list[Row] = field(default_factory=list)
    uuid_request_ids: bool = False
    refused_fields: list[str] = field(default_factory=list)
    rejects_everything: str | None = None
    fields: FieldSupport | None = None  # each optional field: accepted, ignored or refused (evalkit.field_support)
    server_kind: str | None = None  # evalkit.server_kind: whose advice the rows give
    secrets: tuple[str, ...] = field(default=(), repr=False)  # scrubbed from every server text kept

    @property
    def omit_fields(self) -> frozenset[str]:
        """What the client must not send: fields refused in evalkit's request or when probed alone."""
        return frozenset(self.refused_fields) | frozenset(self.fields.refused if self.fields else ())

    def missing(self, commands: tuple[str, ...] = ALL_COMMANDS) -> list[Row]:
        """Rows the given commands need that the server does not support."""
        return [r for r in self.rows if r.supported is False and set(r.needed_by) & set(commands)]

    def to_json(self) -> dict[str, Any]:
        """What `check.json` holds."""
        d = asdict(self)
        d.pop("secrets", None)
        d["rows"] = [asdict(r) for r in self.rows]
        d["fields"] = self.fields.to_json() if self.fields is not None else None
        return d


def server_root(base_url: str) -> str:
    """`http://host:port` of a base URL like `http://host:port/v1`."""
    url = base_url.rstrip("/")
    return url[:-3] if url.endswith("/v1") else url


async def chat_probe(http: aiohttp.ClientSession, base_url: str, body: dict[str, Any],
                     headers: dict[str, str] | None = None,
                     on_first_chunk: Callable[[], None] | None = None) -> Reply:
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


async def _chat_once(http: aiohttp.ClientSession, base_url: str, body: dict[str, Any],
                     headers: dict[str, str] | None, on_first_chunk: Callable[[], None] | None) -> Reply:
    start = time.perf_counter()
    reply = Reply(status=None)
    try:
        async with http.post(base_url.rstrip("/") + "/chat/completions", json=body, headers=headers or {}) as resp:
            reply.status, reply.headers = resp.status, {k.lower(): v for k, v in resp.headers.items()}
            if resp.status != 200:
                # Scrubbed whole, before any excerpt of it is cut (no half of a key survives a cut).
                reply.body = scrub(await resp.text(errors="replace"), _session_secrets(http))
                return reply
            async for raw in resp.content:
                line = raw.decode(errors="replace").strip()
                if not line.startswith("data:") or line[5:].strip() == "[DONE]":
                    continue
                _take(reply, json.loads(line[5:]))
                if reply.chunks and reply.t_first_chunk is None:
                    reply.t_first_chunk = time.perf_counter()
                    if on_first_chunk is not None:
                        on_first_chunk()
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as e:
        # Kept with its HTTP status: a stream cut after a 200 (llama-cpp-python ends one when another request
        # arrives) is not the same as a server that never answered.
        reply.error = f"{type(e).__name__}: {e}"
    reply.t_end = time.perf_counter()
    reply.elapsed_s = reply.t_end - start
    return reply


def _session_secrets(http: aiohttp.ClientSession) -> tuple[str, ...]:
    auth = http.headers.get("Authorization", "")
    return (auth[len("Bearer "):],) if auth.startswith("Bearer ") else ()


def _take(reply: Reply, chunk: dict[str, Any]) -> None:
    if isinstance(chunk.get("usage"), dict):
        reply.usage = chunk["usage"]
    if isinstance(chunk.get("timings"), dict):
        reply.timings = True
    for choice in chunk.get("choices") or []:
        delta = choice.get("delta") or {}
        think = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(think, str) and think:
            reply.reasoning += think
            reply.chunks += 1
        if isinstance(delta.get("content"), str) and delta["content"]:
            reply.content += delta["content"]
            reply.chunks += 1
        if choice.get("finish_reason"):
            reply.finish_reason = choice["finish_reason"]


def evalkit_body(model: str, extra_body: dict[str, Any], max_tokens: int, prompt: str = PROBE_PROMPT,
                 system: str | None = None) -> dict[str, Any]:
    """The body evalkit's client sends (extra body first, the client's own fields over it)."""
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    return {**extra_body, "model": model, "messages": messages, "stream": True,
            "stream_options": {"include_usage": True}, "max_tokens": max_tokens, "temperature": 0.0}


def _probe_id() -> str:
    return f"preflight-{uuid.uuid4().hex[:12]}"


# A server that fails one request in three (the sim's fault tests do) still passes 8 tries but for 0.02% of the
# time; one that fails every request is told apart in a second: the probe asks for 4 tokens.
ESSENTIAL_TRIES = 8


async def essential(http: aiohttp.ClientSession, result: CheckResult, extra_body: dict[str, Any]) -> Reply:
    """Evalkit's own request; when refused, find what is refused. Fills the result's adaptations and rows."""
    body = evalkit_body(result.model, extra_body, 4)
    for _ in range(ESSENTIAL_TRIES):
        # A server error or a broken stream may be one bad moment (a faulty server fails some requests):
        # tried again; only a refusal (4xx) is taken apart below.
        reply = await chat_probe(http, result.base_url, body, {"X-Request-Id": _probe_id()})
        if reply.ok or (reply.status is not None and 400 <= reply.status < 500):
            break
    if reply.ok:
        result.rows.append(Row("evalkit's request", True, "accepted as sent", ALL_COMMANDS))
        return reply
    first = _words(reply, body)
    if reply.status is None or reply.status >= 500 or reply.status == 200:
        result.rejects_everything = first
        result.rows.append(Row("evalkit's request", False, f"failed {ESSENTIAL_TRIES} times: {first}", ALL_COMMANDS,
                               "look at the server's log"))
        return reply
    uuid_reply = await chat_probe(http, result.base_url, body, {"X-Request-Id": str(uuid.uuid4())})
    if uuid_reply.ok:
        result.uuid_request_ids = True
        result.rows.append(Row("evalkit's request", True, f"only with a UUID X-Request-Id ({first}); evalkit "
                               "sends UUID ids, the caller's id kept as request_label", ALL_COMMANDS))
        return uuid_reply
    plain = {"model": result.model, "messages": body["messages"], "stream": True, "max_tokens": 4}
    plain_reply = await chat_probe(http, result.base_url, plain)
    if not plain_reply.ok:
        result.rejects_everything = _words(plain_reply, plain)
        result.rows.append(Row("evalkit's request", False, f"even a bare chat request is refused: "
                               f"{result.rejects_everything}", ALL_COMMANDS,
                               "check --base-url and --model, and the server's log"))
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
        adapted = await chat_probe(http, result.base_url, kept, {"X-Request-Id": _probe_id()})
        if not adapted.ok:
            adapted = await chat_probe(http, result.base_url, kept, {"X-Request-Id": str(uuid.uuid4())})
            result.uuid_request_ids = adapted.ok
    if result.refused_fields and adapted.ok:
        fields_text = ", ".join(result.refused_fields)
        result.rows.append(Row("evalkit's request", True, f"accepted without {fields_text} (refused: {first}); "
                               f"evalkit does not send {fields_text}", ALL_COMMANDS))
        return adapted
    fields_text = ", ".join(result.refused_fields) or "a combination of fields"
    result.rows.append(Row("evalkit's request", False, f"refused ({first}); the server refuses {fields_text}",
                           ALL_COMMANDS, f"remove {fields_text} from the profile's extra_body or thinking style"))
    return plain_reply


def _words(reply: Reply, body: dict[str, Any], secrets: tuple[str, ...] = ()) -> str:
    """The server's own words for a refusal, on one line (scrubbed of secrets)."""
    if reply.status is None:
        return scrub(reply.error or "no answer", secrets)
    if reply.status == 200:
        return scrub(f"HTTP 200 but {reply.chunks} text chunks and finish_reason {reply.finish_reason}"
                     + (f" ({reply.error})" if reply.error else ""), secrets)
    return scrub(describe(reply.status, reply.body, body), secrets)


def _gen_body(result: CheckResult, extra_body: dict[str, Any], tokens: int, prompt: str = GEN_PROMPT) -> dict[str, Any]:
    """A generation of `tokens` as the commands send it: a forced length where the server has one, no refused field."""
    forced, _ = length_fields(result.fields, tokens)
    body = {**evalkit_body(result.model, extra_body, tokens, prompt), **forced}
    return {k: v for k, v in body.items() if k not in result.omit_fields}


@dataclass(frozen=True)
class _Got:
    status_code: int
    text: str

    def json(self) -> Any:
        return json.loads(self.text)


async def _get(http: aiohttp.ClientSession, url: str) -> _Got | None:
    try:
        async with http.get(url) as resp:
            return _Got(resp.status, await resp.text(errors="replace"))
    except (aiohttp.ClientError, asyncio.TimeoutError):
        return None


async def _post(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> Any:
    try:
        async with http.post(url, json=body) as resp:
            return json.loads(await resp.text()) if resp.status == 200 else None
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
        return None


async def tokenize_form(http: aiohttp.ClientSession, root: str, model: str) -> str | None:
    """Which tokenize endpoint and body form the server takes (the ones stress tries), or None."""
    text = "The quick brown fox."
    forms = [("POST /tokenize {model, prompt} (vLLM, SGLang)", "/tokenize", {"model": model, "prompt": text}),
             ("POST /tokenize {content} (llama.cpp)", "/tokenize", {"content": text}),
             ("POST /extras/tokenize {input} (llama-cpp-python)", "/extras/tokenize", {"input": text})]
    for label, path, body in forms:
        data = await _post(http, root + path, body)
        if isinstance(data, dict) and ((data.get("count") or 0) > 0 or data.get("tokens")):
            return label
    return None


async def context_length(http: aiohttp.ClientSession, base_url: str, props: Any) -> tuple[int | None, str]:
    """The server's context length and where it was read."""
    if isinstance(props, dict):
        gen = props.get("default_generation_settings") or {}
        n = gen.get("n_ctx") or props.get("n_ctx")
        if isinstance(n, int):
            return n, "/props"
    resp = await _get(http, base_url.rstrip("/") + "/models")
    if resp is not None and resp.status_code == 200:
        try:
            for m in resp.json().get("data") or []:
                for key in ("max_model_len", "context_length", "n_ctx"):
                    if isinstance(m.get(key), int):
                        return m[key], f"/v1/models {key}"
                meta = m.get("meta") or {}
                if isinstance(meta.get("n_ctx_train"), int):
                    return meta["n_ctx_train"], "/v1/models meta.n_ctx_train (trained, not served)"
        except ValueError:
            pass
    return None, "not reported"


async def concurrency(http: aiohttp.ClientSession, result: CheckResult, extra_body: dict[str, Any],
                      tokens: int = 32) -> Row:
    """Two short generations timed together vs one alone: ~2 when both are served at once, ~1 when queued."""
    body = _gen_body(result, extra_body, tokens)

    alone = await chat_probe(http, result.base_url, body, _hdr(result))
    start = time.perf_counter()
    pair = await asyncio.gather(chat_probe(http, result.base_url, body, _hdr(result)),
                                chat_probe(http, result.base_url, body, _hdr(result)))
    together = time.perf_counter() - start
    killed = [p for p in pair if p.status == 200 and p.finish_reason is None]
    if alone.ok and killed and len(killed) < len(pair):
        # llama-cpp-python: the second request ends the first one's stream (HTTP 200, then nothing more).
        how = "body cut" if killed[0].error else "stream ended"
        return Row("requests served at once", False, f"1: a second request killed the stream in progress "
                   f"(HTTP 200, {how} after {killed[0].chunks} chunks, no finish_reason)")
    if not (alone.ok and all(p.ok for p in pair)) or alone.elapsed_s <= 0:
        bad = next((r for r in (alone, *pair) if not r.ok), alone)
        return Row("requests served at once", None, f"could not time two generations: {_words(bad, body, result.secrets)}")
    # How much the two streams' decode windows (first chunk to end) overlap: 1.0 when the second starts only
    # after the first ended (one slot), ~2 when both stream at once, however slow; a speed-up ratio cannot tell
    # the two apart when a small model's fixed costs dominate (a 2-core CPU llama-server: ~1.2 at -np 1 and 2).
    windows = sorted((p.t_first_chunk or 0.0, p.t_end or 0.0) for p in pair)
    spans = sum(b - a for a, b in windows)
    union = spans - max(0.0, min(windows[0][1], windows[1][1]) - windows[1][0])
    served = spans / union if union > 0 else 1.0
    return Row("requests served at once", True, f"~{served:.1f} (the two streams of a pair overlapped for "
               f"{spans - union:.2f} of {union:.2f} s; the pair took {together:.2f} s, one alone "
               f"{alone.elapsed_s:.2f} s)")


KILL_TRIES = 5
KILL_ATTEMPTS = 10
KILL_ROW = "a new request kills the stream in progress"


async def stream_killing(http: aiohttp.ClientSession, result: CheckResult, extra_body: dict[str, Any],
                         tries: int = KILL_TRIES, tokens: int = 64, attempts: int = KILL_ATTEMPTS) -> Row:
    """Does a request that arrives end the stream in progress (llama-cpp-python's server does)?

    A generation of `tokens` is started and, once its first chunk is read, a second request is sent. A kill is
    seen when the first stream then ends with HTTP 200 and no finish_reason, after the second was sent, while the
    second one finishes; a clean try is one where both finish and the first streamed on for at least half its
    streaming time after the second was sent (so the second had reached the server). One clean try is a no (a
    server that kills streams kills every one); yes needs `tries` kills, so a server that drops connections at
    random (the sim's fault tests drop 15%) is called a killer ~3e-5 of the time. A try that is neither (a slow
    client sent the second late, or something failed) is sent again, up to `attempts` in all. `stress` relabels
    cut streams only on a yes.
    """
    body = _gen_body(result, extra_body, tokens)
    seen, notes = 0, []
    for i in range(attempts):
        started = asyncio.Event()
        first = asyncio.ensure_future(chat_probe(http, result.base_url, body, _hdr(result), started.set))
        waiter = asyncio.ensure_future(started.wait())
        await asyncio.wait([first, waiter], return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        t_second = time.perf_counter()
        second = await chat_probe(http, result.base_url, body, _hdr(result))
        a = await first
        if a.ok and second.ok and a.t_end is not None and a.t_first_chunk is not None and \
                a.t_end - t_second >= 0.5 * (a.t_end - a.t_first_chunk):
            return Row(KILL_ROW, False, f"no: a stream finished while a second request ran (try {i + 1})")
        if a.status == 200 and a.finish_reason is None and a.t_end is not None and a.t_end >= t_second \
                and second.ok:
            seen += 1
            notes.append(f"{a.t_end - t_second:.3f} s after the second request was sent, {a.chunks} chunks in")
            if seen == tries:
                return Row(KILL_ROW, True, f"yes, {seen} of {i + 1} tries: the first stream ended (HTTP 200, no "
                           f"finish_reason) {notes[0]}; stress counts such streams as killed_stream")
    return Row(KILL_ROW, None, f"can't tell: {seen} of {attempts} tries saw a kill, none finished both in time")


def _scrubbed(result: CheckResult, api_key: str | None) -> CheckResult:
    # Probe results quote the server (its refusals, its headers): scrubbed before they are printed or written.
    keys = (api_key,)
    result.rows = [_scrub_row(r, keys) for r in result.rows]
    if result.rejects_everything is not None:
        result.rejects_everything = scrub(result.rejects_everything, keys)
    result.refused_fields = [scrub(f, keys) for f in result.refused_fields]
    return result


def _scrub_row(row: Row, keys: tuple[str | None, ...]) -> Row:
    return replace(row, detail=scrub(row.detail, keys), fix=scrub(row.fix, keys) if row.fix else row.fix)


def _http(api_key: str | None, timeout_s: float) -> aiohttp.ClientSession:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return aiohttp.ClientSession(headers=headers, timeout=aiohttp.ClientTimeout(total=timeout_s))


def _cache_name(result: CheckResult) -> str:
    return f"{result.base_url.rstrip('/')} model={result.model}"


async def learn_fields(http: aiohttp.ClientSession, result: CheckResult, extra_body: dict[str, Any],
                       identity: dict[str, Any] | None = None, refresh: bool = False) -> FieldSupport:
    """Each optional field's support (evalkit.field_support): from the cache when fresh for this server's identity
    and it knows every field of the profile, else probed, then cached. Sets `result.fields`."""
    support = None if refresh else field_cache.load(_cache_name(result), identity)
    if support is not None and not set(extra_body) <= set(support.fields):
        support = None

    async def send(body: dict[str, Any], headers: dict[str, str]) -> ProbeReply:
        r = await chat_probe(http, result.base_url, body, headers)
        n = r.usage.get("completion_tokens") if r.usage else (r.chunks if r.status == 200 else None)
        return ProbeReply(r.status, _words(r, body, result.secrets), r.ok, n, r.usage is not None, r.finish_reason,
                          r.headers.get("x-request-id"))

    if support is None:
        support = await probe_fields(send, result.model, extra_body, _probe_id, result.uuid_request_ids)
        if all(v.status != "can't tell" for v in support.fields.values()):
            field_cache.store(_cache_name(result), identity, support)
    result.fields = support
    return support


async def quick_check(base_url: str, model: str, api_key: str | None, extra_body: dict[str, Any],
                      timeout_s: float = 60.0, identity: dict[str, Any] | None = None) -> CheckResult:
    """Evalkit's own request (and, when refused, its variants), then what each optional field gets: what a command
    needs before it starts."""
    result = CheckResult(base_url=base_url, model=model, secrets=(api_key,) if api_key else ())
    async with _http(api_key, timeout_s) as http:
        await essential(http, result, extra_body)
        if result.rejects_everything is None and all(r.supported is not False for r in result.rows):
            await learn_fields(http, result, extra_body, identity)
    return _scrubbed(result, api_key)


def _cause(reply: Reply, body: dict[str, Any], result: CheckResult) -> str:
    """Why a probe did not get its answer, in the server's own status and words."""
    return _words(reply, body, result.secrets)


async def _endpoint(http: aiohttp.ClientSession, url: str, result: CheckResult) -> tuple[_Got | None, str]:
    got = await _get(http, url)
    if got is None:
        return None, "no answer"
    return got, scrub(describe(got.status_code, got.text), result.secrets)


async def full_check(base_url: str, model: str, api_key: str | None, extra_body: dict[str, Any],
                     thinking: dict[str, tuple[dict[str, Any], str | None]], timeout_s: float = 30.0,
                     identity: dict[str, Any] | None = None, ignore_eos: bool = True) -> CheckResult:
    """Every probe; `thinking` maps a mode (off, low ...) to the (extra body, system prompt) that asks for it.

    Each failed probe names its cause (the server's status and body, scrubbed), and the advice is the one for the
    server kind seen (evalkit.server_kind), never another server's flags."""
    from evalkit.server_kind import LABELS, advice, server_kind

    kind = server_kind(identity)
    result = CheckResult(base_url=base_url, model=model, server_kind=kind, secrets=(api_key,) if api_key else ())
    root = server_root(base_url)
    async with _http(api_key, timeout_s) as http:
        first = await essential(http, result, extra_body)
        if result.rejects_everything is not None:
            return _scrubbed(result, api_key)
        rows = result.rows
        rows.append(Row("server kind", None if kind == "unknown" else True, LABELS[kind] if kind != "unknown" else
                        "not recognised (advice below is generic)"))
        support = await learn_fields(http, result, extra_body, identity, refresh=True)
        body0 = {k: v for k, v in extra_body.items() if k not in result.omit_fields}
        rows.append(Row("streaming", first.ok, f"{first.chunks} text chunks, finish_reason {first.finish_reason}",
                        ALL_COMMANDS))
        rows.append(Row("usage in stream", first.usage is not None,
                        "stream_options.include_usage honoured" if first.usage is not None
                        else "no usage chunk: tokens are counted from chunks (usage_source \"chunks\")"
                        + ("; stream_options is refused" if "stream_options" in result.omit_fields else "")))
        for name, v in support.fields.items():
            label = "X-Request-Id header" if name.startswith("header:") else f"field {name}"
            if v.status == REFUSED:
                topic = "request_id" if name.startswith("header:") else "ignore_eos" if name == "ignore_eos" \
                    else "field"
                rows.append(Row(label, False, f"refused: {v.detail}; evalkit does not send it",
                                fix=advice(kind, topic)))
            else:
                rows.append(Row(label, None if v.status == "can't tell" else True, f"{v.status}: {v.detail}"))
        rid = str(uuid.uuid4()) if result.uuid_request_ids else _probe_id()
        echo_body = evalkit_body(model, body0, 2)
        echo_body = {k: v for k, v in echo_body.items() if k not in result.omit_fields}
        echo = await chat_probe(http, base_url, echo_body, {"X-Request-Id": rid})
        echoed = echo.headers.get("x-request-id") == rid
        rows.append(Row("X-Request-Id echo", echoed if echo.ok else None,
                        "echoed in the response headers" if echoed else
                        "not echoed: server logs are matched to records by time only" if echo.ok else
                        f"can't tell: {_cause(echo, echo_body, result)}"))
        rows.append(Row("timings in stream", first.timings, "llama.cpp `timings` (server-side prefill/decode)"
                        if first.timings else "none: timing is the client's alone"
                        + (f" ({advice(kind, 'timings')})" if kind != "unknown" else "")))
        # A question whose answer is one number, and room for far more: the server must stop at max_tokens, and one
        # that forces a length (ignore_eos, else min_tokens) runs on to it. Only fields it takes are sent: a refusal
        # of another field is named, not read as "max_tokens not honoured".
        cap = 48
        forced, mode = length_fields(support, cap, ignore_eos)
        capped_body = {**evalkit_body(model, body0, cap, "What is 17 + 25? Reply with only the number."), **forced}
        capped_body = {k: v for k, v in capped_body.items() if k not in result.omit_fields}
        capped = await chat_probe(http, base_url, capped_body, _hdr(result))
        n = capped.usage.get("completion_tokens") if capped.usage else capped.chunks
        if capped.ok:
            rows.append(Row("max_tokens honoured", n is not None and n <= cap,
                            f"asked {cap}, got {n} ({capped.finish_reason})", ("bench", "stress"),
                            "the server must stop at max_tokens: bench rates and stress plans depend on it"))
        else:
            rows.append(Row("max_tokens honoured", None, f"can't tell: {_cause(capped, capped_body, result)}"))
        how = {"ignore_eos": "ignore_eos", "min_tokens": "min_tokens (ignore_eos is not honoured)",
               "prompt": "none: prompts must run long on their own (max_tokens is their cap); such figures are "
                         "marked length_forced false"}[mode]
        rows.append(Row("fixed output length", mode != "prompt",
                        f"{how}" + (f"; a one-number answer ran to {n}/{cap}" if capped.ok and mode != "prompt"
                                    else "") + ("" if ignore_eos else " (--no-ignore-eos)"),
                        fix=None if mode != "prompt" else advice(kind, "ignore_eos")))
        tok = await tokenize_form(http, root, model)
        rows.append(Row("tokenize endpoint", tok is not None, tok or "none: stress counts long prompts from usage "
                        "or a local estimate" + (f" ({advice(kind, 'tokenize')})" if kind != "unknown" else "")))
        rows.append(Row("token counting for stress", tok is not None or first.usage is not None,
                        "tokenize endpoint" if tok else "usage in stream" if first.usage else
                        "neither tokenize nor usage", ("stress",),
                        "long prompts cannot be fitted to --long-tokens: enable /tokenize or usage in the stream"))
        metrics, why = await _endpoint(http, root + "/metrics", result)
        has_metrics = metrics is not None and metrics.status_code == 200 and "# TYPE" in metrics.text
        rows.append(Row("/metrics", has_metrics, "Prometheus text" if has_metrics else
                        f"not served ({why})", fix=None if has_metrics else advice(kind, "metrics")))
        props_resp, why = await _endpoint(http, root + "/props", result)
        props = None
        if props_resp is not None and props_resp.status_code == 200:
            try:
                props = props_resp.json()
            except ValueError:
                props = None
        rows.append(Row("/props", isinstance(props, dict), "llama.cpp server properties" if props else
                        f"not served ({why})"))
        n_ctx, where = await context_length(http, base_url, props)
        rows.append(Row("context length", n_ctx is not None, f"{n_ctx} ({where})" if n_ctx else where))
        for mode_name, (body, system) in thinking.items():
            sent = evalkit_body(model, {**body0, **body}, 48, "What is 17 * 3?", system)
            sent = {k: v for k, v in sent.items() if k not in result.omit_fields}
            reply = await chat_probe(http, base_url, sent, _hdr(result))
            reasoning = reply.reasoning or split_inline_reasoning(reply.content)[0]
            want = mode_name != "off"
            if not reply.ok:
                rows.append(Row(f"thinking {mode_name}", False, f"refused: {_cause(reply, sent, result)}",
                                ("capability",), "pick the profile's thinking style this server understands"))
                continue
            dropped = [k for k in body if k in result.omit_fields]
            seen = bool(reasoning)
            rows.append(Row(f"thinking {mode_name}", seen == want,
                            ("reasoning seen" if seen else "no reasoning seen")
                            + ("" if seen == want else " (the mode does not take effect)")
                            + (f"; {', '.join(dropped)} refused, not sent" if dropped else "")))
        rows.append(await concurrency(http, result, body0))
        rows.append(await stream_killing(http, result, body0))
    return _scrubbed(result, api_key)


async def kill_check(base_url: str, model: str, api_key: str | None, extra_body: dict[str, Any],
                     uuid_request_ids: bool, timeout_s: float = 60.0, preflight: CheckResult | None = None) -> Row:
    """`stream_killing` alone, for a command that already passed the quick check (stress runs it first)."""
    result = CheckResult(base_url=base_url, model=model, uuid_request_ids=uuid_request_ids,
                         secrets=(api_key,) if api_key else ())
    if preflight is not None:  # what the quick check learned: the same fields are left out
        result.fields, result.refused_fields = preflight.fields, list(preflight.refused_fields)
    async with _http(api_key, timeout_s) as http:
        return _scrub_row(await stream_killing(http, result, extra_body), (api_key,))


def _hdr(result: CheckResult) -> dict[str, str]:
    return {"X-Request-Id": str(uuid.uuid4()) if result.uuid_request_ids else _probe_id()}
