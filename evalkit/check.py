"""The preflight (`evalkit check`): what a server supports and how evalkit will talk to it, probe by probe.

Every probe is a real request over HTTP; a probe that cannot tell says so. It starts with the essential probe that
runs quietly before bench, capability and stress (evalkit.client.probe), then context length, tokenize endpoints,
concurrency, stream killing, thinking modes and every optional field.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from typing import Any

from evalkit.addresses import server_root
from evalkit.client import auxiliary
from evalkit.client.field_support import REFUSED, UNOBSERVED, length_fields, length_state, unforced_words
from evalkit.client.http_errors import describe
from evalkit.client.identity_json import ServerIdentity
from evalkit.client.probe import (
    ALL_COMMANDS,
    CheckResult,
    Reply,
    Row,
    chat_probe,
    essential,
    evalkit_body,
    generation_body,
    learn_fields,
    probe_headers,
    probe_id,
    probe_session,
    refusal_words,
    scrubbed,
)
from evalkit.client.stream_killing import stream_killing
from evalkit.client.thinking_text import split_inline_reasoning
from evalkit.config.profiles import ThinkingBody
from evalkit.progress import Progress


@dataclass(frozen=True)
class _Got:
    status_code: int
    text: str

    def json(self) -> Any:
        return auxiliary.parse_json(self.text)


async def _get(http: auxiliary.ClientSession, url: str) -> _Got | None:
    try:
        async with http.get(url) as resp:
            return _Got(resp.status, await auxiliary.read_text(resp))
    except (auxiliary.ClientError, asyncio.TimeoutError):
        return None


async def _post(http: auxiliary.ClientSession, url: str, body: dict[str, str]) -> Any:
    try:
        async with http.post(url, json=body) as resp:
            return await auxiliary.read_json(resp) if resp.status == 200 else None
    except (auxiliary.ClientError, asyncio.TimeoutError, ValueError):
        return None


async def tokenize_form(http: auxiliary.ClientSession, root: str, model: str) -> str | None:
    """Which tokenize endpoint and body form the server takes (the ones stress tries), or None."""
    text = "The quick brown fox."
    forms = [
        ("POST /tokenize {model, prompt} (vLLM, SGLang)", "/tokenize", {"model": model, "prompt": text}),
        ("POST /tokenize {content} (llama.cpp)", "/tokenize", {"content": text}),
        ("POST /extras/tokenize {input} (llama-cpp-python)", "/extras/tokenize", {"input": text}),
    ]
    for label, path, body in forms:
        data = await _post(http, root + path, body)
        count = data.get("count") if isinstance(data, dict) else None
        if isinstance(data, dict) and ((isinstance(count, int) and count > 0) or data.get("tokens")):
            return label
    return None


async def context_length(http: auxiliary.ClientSession, base_url: str, props: Any) -> tuple[int | None, str]:
    """The server's context length and where it was read."""
    if isinstance(props, dict):
        gen = props.get("default_generation_settings")
        n = (gen.get("n_ctx") if isinstance(gen, dict) else None) or props.get("n_ctx")
        if isinstance(n, int):
            return n, "/props"
    resp = await _get(http, base_url.rstrip("/") + "/models")
    if resp is not None and resp.status_code == 200:
        try:
            page = resp.json()
            models = page.get("data") if isinstance(page, dict) else None
            for m in models if isinstance(models, list) else []:
                if not isinstance(m, dict):
                    continue
                for key in ("max_model_len", "context_length", "n_ctx"):
                    if isinstance(m.get(key), int):
                        return m[key], f"/v1/models {key}"
                meta = m.get("meta")
                if isinstance(meta, dict) and isinstance(meta.get("n_ctx_train"), int):
                    return meta["n_ctx_train"], "/v1/models meta.n_ctx_train (trained, not served)"
        except ValueError:
            pass
    return None, "not reported"


PAIRS = 3  # pairs timed at most: a server that batches overlaps in one of them even when one pair was admitted late
OVERLAPPED = 1.3  # a pair reading this many requests at once or more is not timed again


async def concurrency(
    http: auxiliary.ClientSession, result: CheckResult, extra_body: dict[str, Any], tokens: int = 32
) -> Row:
    """Two short generations timed together vs one alone: ~2 when both are served at once, ~1 when queued. A pair
    whose streams barely overlap (under `OVERLAPPED`) is timed again, up to `PAIRS` pairs, and the best pair is
    shown: on a busy machine a batching server (vLLM) may take the second request in only after the first ended,
    while a queueing one (llama.cpp -np 1) never overlaps."""
    body = generation_body(result, extra_body, tokens)
    alone = await chat_probe(http, result.base_url, body, probe_headers(result))
    best: tuple[float, float, float, float] | None = None  # served, overlap, union, together
    timed = 0
    while timed < PAIRS:
        timed += 1
        start = time.perf_counter()
        pair = await asyncio.gather(
            chat_probe(http, result.base_url, body, probe_headers(result)),
            chat_probe(http, result.base_url, body, probe_headers(result)),
        )
        together = time.perf_counter() - start
        killed = [p for p in pair if p.status == 200 and p.finish_reason is None]
        if alone.ok and killed and len(killed) < len(pair):
            # llama-cpp-python: the second request ends the first one's stream (HTTP 200, then nothing more).
            how = "body cut" if killed[0].error else "stream ended"
            return Row(
                "requests served at once",
                False,
                f"1: a second request killed the stream in progress "
                f"(HTTP 200, {how} after {killed[0].chunks} chunks, no finish_reason)",
            )
        if not (alone.ok and all(p.ok for p in pair)) or alone.elapsed_s <= 0:
            bad = next((r for r in (alone, *pair) if not r.ok), alone)
            said = refusal_words(bad, body, result.secrets)
            return Row("requests served at once", None, f"could not time two generations: {said}")
        # How much the two streams' decode windows (first chunk to end) overlap: 1.0 when the second starts only
        # after the first ended (one slot), ~2 when both stream at once, however slow; a speed-up ratio cannot tell
        # the two apart when a small model's fixed costs dominate (a 2-core CPU llama-server: ~1.2 at -np 1 and 2).
        windows = sorted((p.t_first_chunk or 0.0, p.t_end or 0.0) for p in pair)
        spans = sum(b - a for a, b in windows)
        union = spans - max(0.0, min(windows[0][1], windows[1][1]) - windows[1][0])
        served = spans / union if union > 0 else 1.0
        if best is None or served > best[0]:
            best = (served, spans - union, union, together)
        if served >= OVERLAPPED:
            break
    assert best is not None
    served, overlap, union, together = best
    tries = f"; the best of {timed} pairs" if timed > 1 else ""
    return Row(
        "requests served at once",
        True,
        f"~{served:.1f} (the two streams of a pair overlapped for "
        f"{overlap:.2f} of {union:.2f} s; the pair took {together:.2f} s, one alone "
        f"{alone.elapsed_s:.2f} s{tries})",
    )


def _cause(reply: Reply, body: dict[str, Any], result: CheckResult) -> str:
    """Why a probe did not get its answer, in the server's own status and words."""
    return refusal_words(reply, body, result.secrets)


async def _endpoint(http: auxiliary.ClientSession, url: str, result: CheckResult) -> tuple[_Got | None, str]:
    got = await _get(http, url)
    if got is None:
        return None, "no answer"
    return got, describe(got.status_code, got.text, secrets=result.secrets)  # scrubbed before its cut


async def full_check(
    base_url: str,
    model: str,
    api_key: str | None,
    extra_body: dict[str, Any],
    thinking: dict[str, tuple[ThinkingBody, str | None]],
    timeout_s: float = 30.0,
    identity: ServerIdentity | None = None,
    ignore_eos: bool = True,
) -> CheckResult:
    """Every probe; `thinking` maps a mode (off, low ...) to the (extra body, system prompt) that asks for it.

    Each failed probe names its cause (the server's status and body, scrubbed), and the advice is the one for the
    server kind seen (evalkit.evidence.server_kind), never another server's flags."""
    from evalkit.evidence.server_kind import server_kind

    kind = server_kind(identity)
    result = CheckResult(base_url=base_url, model=model, server_kind=kind, secrets=(api_key,) if api_key else ())
    root = server_root(base_url)
    # A slow server's check can pass 30 s: its probes answered so far (a row each; the total is what a server that
    # takes every field gives) as a bar on a terminal, a line at least every 25 s in a log (evalkit.progress).
    progress = Progress(CHECK_ROWS + len(thinking), "check", "probes")
    following = asyncio.get_running_loop().create_task(progress.follow(lambda: len(result.rows)))
    try:
        return await _probes(
            result, kind, root, base_url, model, api_key, extra_body, thinking, timeout_s, identity, ignore_eos
        )
    finally:
        following.cancel()
        progress.total = len(result.rows)  # the count it came to: the total shown until then was an estimate
        progress.update(len(result.rows) - progress.done)
        progress.close()


CHECK_ROWS = 22  # a check's rows less its thinking modes, against a server that takes every field (the sim)


async def _probes(
    result: CheckResult,
    kind: str,
    root: str,
    base_url: str,
    model: str,
    api_key: str | None,
    extra_body: dict[str, Any],
    thinking: dict[str, tuple[ThinkingBody, str | None]],
    timeout_s: float,
    identity: ServerIdentity | None,
    ignore_eos: bool,
) -> CheckResult:
    from evalkit.evidence.server_kind import advice
    from evalkit.evidence.server_kind import label as kind_label

    async with probe_session(api_key, timeout_s) as http:
        first = await essential(http, result, extra_body)
        if result.rejects_everything is not None:
            return scrubbed(result, api_key)
        rows = result.rows
        rows.append(
            Row(
                "server kind",
                None if kind == "unknown" else True,
                kind_label(kind) if kind != "unknown" else "not recognised (advice below is generic)",
            )
        )
        support = await learn_fields(http, result, extra_body, identity, refresh=True)
        body0 = {k: v for k, v in extra_body.items() if k not in result.omit_fields}
        rows.append(
            Row("streaming", first.ok, f"{first.chunks} text chunks, finish_reason {first.finish_reason}", ALL_COMMANDS)
        )
        rows.append(
            Row(
                "usage in stream",
                first.usage is not None,
                "stream_options.include_usage honoured"
                if first.usage is not None
                else 'no usage chunk: tokens are counted from chunks (usage_source "chunks")'
                + ("; stream_options is refused" if "stream_options" in result.omit_fields else ""),
            )
        )
        for name, v in support.fields.items():
            label = "X-Request-Id header" if name.startswith("header:") else f"field {name}"
            if v.status == REFUSED:
                topic = (
                    "request_id" if name.startswith("header:") else "ignore_eos" if name == "ignore_eos" else "field"
                )
                rows.append(
                    Row(label, False, f"refused: {v.detail}; evalkit does not send it", fix=advice(kind, topic))
                )
            else:
                rows.append(Row(label, None if v.status == "can't tell" else True, f"{v.status}: {v.detail}"))
        rid = str(uuid.uuid4()) if result.uuid_request_ids else probe_id()
        echo_body = evalkit_body(model, body0, 2)
        echo_body = {k: v for k, v in echo_body.items() if k not in result.omit_fields}
        echo = await chat_probe(http, base_url, echo_body, {"X-Request-Id": rid})
        echoed = echo.headers.get("x-request-id") == rid
        rows.append(
            Row(
                "X-Request-Id echo",
                echoed if echo.ok else None,
                "echoed in the response headers"
                if echoed
                else "not echoed: server logs are matched to records by time only"
                if echo.ok
                else f"can't tell: {_cause(echo, echo_body, result)}",
                fix=advice(kind, "request_echo") if echo.ok and not echoed and kind == "vllm" else None,
            )
        )
        rows.append(
            Row(
                "timings in stream",
                first.timings,
                "llama.cpp `timings` (server-side prefill/decode)"
                if first.timings
                else "none: timing is the client's alone"
                + (f" ({advice(kind, 'timings')})" if kind != "unknown" else ""),
            )
        )
        # A question whose answer is one number, and room for far more: the server must stop at max_tokens, and one
        # that forces a length (ignore_eos, else min_tokens) runs on to it. Only fields it takes are sent: a refusal
        # of another field is named, not read as "max_tokens not honoured".
        cap = 48
        forced, mode = length_fields(support, cap, ignore_eos)
        capped_body = {**evalkit_body(model, body0, cap, "What is 17 + 25? Reply with only the number."), **forced}
        capped_body = {k: v for k, v in capped_body.items() if k not in result.omit_fields}
        capped = await chat_probe(http, base_url, capped_body, probe_headers(result))
        n = capped.usage.get("completion_tokens") if capped.usage else capped.chunks
        if capped.ok:
            rows.append(
                Row(
                    "max_tokens honoured",
                    n is not None and n <= cap,
                    f"asked {cap}, got {n} ({capped.finish_reason})",
                    ("bench", "stress"),
                    "the server must stop at max_tokens: bench rates and stress plans depend on it",
                )
            )
        else:
            rows.append(Row("max_tokens honoured", None, f"can't tell: {_cause(capped, capped_body, result)}"))
        state = length_state(support, ignore_eos)
        how = {
            "ignore_eos": "ignore_eos",
            "min_tokens": "min_tokens (ignore_eos is not honoured)",
            "prompt": f"none ({unforced_words(support, ignore_eos)}): prompts must run long on their own "
            "(max_tokens is their cap); such figures are marked length_forced false",
        }[mode]
        if state == UNOBSERVED:  # sent: the model runs to max_tokens either way, so nothing tells whether it forces
            how = f"{unforced_words(support, ignore_eos)}; such figures are marked length_forced null"
        rows.append(
            Row(
                "fixed output length",
                None if state == UNOBSERVED else mode != "prompt",
                f"{how}"
                + (f"; a one-number answer ran to {n}/{cap}" if capped.ok and mode != "prompt" else "")
                + ("" if ignore_eos else " (--no-ignore-eos)"),
                fix=None if mode != "prompt" or state == UNOBSERVED else advice(kind, "ignore_eos"),
            )
        )
        tok = await tokenize_form(http, root, model)
        rows.append(
            Row(
                "tokenize endpoint",
                tok is not None,
                tok
                or "none: stress counts long prompts from usage or a local estimate"
                + (f" ({advice(kind, 'tokenize')})" if kind != "unknown" else ""),
            )
        )
        rows.append(
            Row(
                "token counting for stress",
                tok is not None or first.usage is not None,
                "tokenize endpoint" if tok else "usage in stream" if first.usage else "neither tokenize nor usage",
                ("stress",),
                "long prompts cannot be fitted to --long-tokens: enable /tokenize or usage in the stream",
            )
        )
        metrics, why = await _endpoint(http, root + "/metrics", result)
        has_metrics = metrics is not None and metrics.status_code == 200 and "# TYPE" in metrics.text
        rows.append(
            Row(
                "/metrics",
                has_metrics,
                "Prometheus text" if has_metrics else f"not served ({why})",
                fix=None if has_metrics else advice(kind, "metrics"),
            )
        )
        props_resp, why = await _endpoint(http, root + "/props", result)
        props = None
        if props_resp is not None and props_resp.status_code == 200:
            try:
                props = props_resp.json()
            except ValueError as e:  # not JSON, or JSON nested too deep to use
                why = f"HTTP 200, {e}" if "nested deeper" in str(e) else f"HTTP 200, not JSON: {why}"
            if props is not None and not isinstance(props, dict):
                why, props = f"HTTP 200, a JSON {type(props).__name__}, not an object", None
        rows.append(
            Row("/props", isinstance(props, dict), "llama.cpp server properties" if props else f"not served ({why})")
        )
        n_ctx, where = await context_length(http, base_url, props)
        rows.append(Row("context length", n_ctx is not None, f"{n_ctx} ({where})" if n_ctx else where))
        for mode_name, (body, system) in thinking.items():
            sent = evalkit_body(model, {**body0, **body}, 48, "What is 17 * 3?", system)
            sent = {k: v for k, v in sent.items() if k not in result.omit_fields}
            reply = await chat_probe(http, base_url, sent, probe_headers(result))
            reasoning = reply.reasoning or split_inline_reasoning(reply.content)[0]
            want = mode_name != "off"
            if not reply.ok:
                rows.append(
                    Row(
                        f"thinking {mode_name}",
                        False,
                        f"refused: {_cause(reply, sent, result)}",
                        ("capability",),
                        "pick the profile's thinking style this server understands",
                    )
                )
                continue
            dropped = [k for k in body if k in result.omit_fields]
            seen = bool(reasoning)
            rows.append(
                Row(
                    f"thinking {mode_name}",
                    seen == want,
                    ("reasoning seen" if seen else "no reasoning seen")
                    + ("" if seen == want else " (the mode does not take effect)")
                    + (f"; {', '.join(dropped)} refused, not sent" if dropped else ""),
                )
            )
        rows.append(await concurrency(http, result, body0))
        rows.append(await stream_killing(http, result, body0))
    return scrubbed(result, api_key)
