"""The sim's HTTP face (aiohttp): OpenAI chat completions with llama.cpp-style SSE, plus ground-truth endpoints.

Routes: `GET /v1/models`, `POST /v1/chat/completions` (streaming and not; usage in a final `choices: []` chunk only
with `stream_options.include_usage`), `GET /health`, `POST /tokenize`, `GET /sim/events`, `POST /sim/reset`,
`GET /sim/config`, and `POST /reset_prefix_cache` (vLLM's name) to empty the prefix cache. With `--openai-only`
only the OpenAI routes (and the sim's own `/sim/*`, which a client under test never calls) are served. Headers go
out at once; the role-only chunk follows when the prefill ends, then one chunk per token. `arrived` is when the
kernel received the request's first bytes (on Linux; elsewhere as the handler starts, before the body is read),
and `first_token` is stamped as the first token's chunk is handed to the socket, so `first_token - arrived` is
what a client should measure as TTFT.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import uuid
import zlib
from collections.abc import Awaitable, Callable
from typing import Any, TypedDict, cast

from aiohttp import web

from evalkit.client.tokens import message_text, prompt_tokens, tokenize
from evalkit.clock import Clock
from evalkit.sim.answers import answer_text, filler_tokens
from evalkit.sim.chat_message import ChatMessage
from evalkit.sim.compat import refusal
from evalkit.sim.determinism import unit_draw
from evalkit.sim.engine import CANCELLED, END, KILLED, PREFILLED, TOKEN, Engine, Job
from evalkit.sim.faults import choose_fault
from evalkit.sim.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from evalkit.sim.metrics import render as render_metrics
from evalkit.sim.output import Output, build_output
from evalkit.sim.prefix_cache import chat_token_sequence
from evalkit.sim.questions import (
    Question,
    QuestionIndex,
    indexed_names,
    judge_question,
    recognise,
    stress_question,
    user_texts,
)
from evalkit.sim.serverlog import SimLog
from evalkit.sim.settings import SimSettings
from evalkit.sim.thinking import decide
from evalkit.sim.trace import RequestTrace

# The request's (clock, perf_counter) arrival, set by the arrival middleware.
ARRIVED = "evalkit.arrived"

# What aiohttp raises when writing to a connection the client has closed.
_WRITE_ERRORS = (ConnectionError, RuntimeError)


class _LlamaTimingsBase(TypedDict):
    cache_n: int
    prompt_n: int
    prompt_ms: float
    prompt_per_token_ms: float
    prompt_per_second: float | None
    predicted_n: int
    predicted_ms: float
    predicted_per_token_ms: float
    predicted_per_second: float | None


class LlamaTimings(_LlamaTimingsBase, total=False):
    """llama.cpp's `timings` as the sim sends them (`_timings`); the draft counts where it drafted."""

    draft_n: int
    draft_n_accepted: int


class _Choice(TypedDict):
    index: int
    delta: dict[str, str | None]
    finish_reason: str | None


class _Chunk(TypedDict, total=False):
    choices: list[_Choice]
    timings: LlamaTimings
    usage: dict[str, int]


class SimServer:
    """Holds the engine, the question index and the event log; builds the aiohttp application."""

    def __init__(self, settings: SimSettings, clock: Clock | None = None) -> None:
        self.s = settings
        self.log = SimLog(settings.server_log, stamps=settings.log_timestamps)
        self.clock = clock or Clock()
        self.index = QuestionIndex(settings.data_dir)
        self.traces: list[RequestTrace] = []
        self.engine: Engine | None = None
        self._arrivals = 0
        self._index_loading: asyncio.Future[None] | None = None

    def app(self) -> web.Application:
        """The aiohttp application."""
        app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=[self._stamp_arrival])
        app.router.add_get("/v1/models", self.models)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_get("/health", self.health)
        if not self.s.openai_only:  # a strict OpenAI-only server answers 404 here; /sim/* stay for the tests
            app.router.add_post("/tokenize", self.tokenize)
        app.router.add_get("/sim/events", self.events)
        app.router.add_post("/sim/reset", self.reset)
        app.router.add_get("/sim/config", self.config)
        app.router.add_post("/reset_prefix_cache", self.reset_prefix_cache)
        if self.s.metrics and not self.s.openai_only:
            app.router.add_get("/metrics", self.metrics)
        app.on_startup.append(self._on_startup)
        app.on_cleanup.append(self._on_cleanup)
        return app

    async def _on_startup(self, app: web.Application) -> None:
        self.engine = Engine(self.s, self.clock, log=self.log)
        # The start-up lines real servers print: FastLLM's silent clamp (write-up) and its context per session.
        if self.s.clamp_batch and self.s.max_batch > 1:
            self.log.write(f"explicit-token safety max_batch limited {self.s.max_batch} -> 1")
        self.log.write(f"Model context window: {self.s.context_tokens} tokens per session")
        self.engine.start()

    async def _on_cleanup(self, app: web.Application) -> None:
        if self.engine:
            await self.engine.stop()

    # -- small endpoints -----------------------------------------------------------------------------------
    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "object": "list",
                "data": [{"id": self.s.model, "object": "model", "created": 0, "owned_by": "evalkit-sim"}],
            }
        )

    async def config(self, request: web.Request) -> web.Response:
        return web.json_response(self.s.to_json())

    async def metrics(self, request: web.Request) -> web.Response:
        e = self.engine
        running, waiting = e.gauges() if e else (0, 0)
        body = render_metrics(
            self.s.model,
            running,
            waiting,
            self.traces,
            e.spec if e else None,
            spec_names=self.s.spec_metric_names,
            prefix_cache=(e.prefix_cache.queries_tokens, e.prefix_cache.hits_tokens) if e and e.prefix_cache else None,
        )
        return web.Response(body=body, headers={"Content-Type": METRICS_CONTENT_TYPE})

    async def events(self, request: web.Request) -> web.Response:
        return web.json_response({"events": [t.to_json() for t in self.traces]})

    async def reset(self, request: web.Request) -> web.Response:
        self.traces = []
        self._arrivals = 0
        if self.engine:
            self.engine.clear()
            if self.engine.prefix_cache is not None:
                self.engine.prefix_cache.clear()
        return web.json_response({"ok": True})

    async def reset_prefix_cache(self, request: web.Request) -> web.Response:
        cache = self.engine.prefix_cache if self.engine else None
        if cache is None:
            return _error(400, "no prefix cache (start the sim with --prefix-cache-blocks N)")
        cache.clear()
        return web.json_response({"ok": True})

    async def tokenize(self, request: web.Request) -> web.Response:
        if not self.s.tokenize_endpoint:
            return _error(404, "Not Found")
        body = await _json_body(request)
        if body is None:
            return _error(400, "body must be JSON")
        if isinstance(body.get("content"), str):  # llama.cpp
            return web.json_response({"tokens": _token_ids(body["content"])})
        if isinstance(body.get("messages"), list):  # vLLM, chat form
            msgs = body["messages"]
            text = "".join(str(m.get("content", "")) for m in msgs if isinstance(m, dict))
            return web.json_response(
                {"count": prompt_tokens(msgs), "tokens": _token_ids(text), "max_model_len": 262144}
            )
        if isinstance(body.get("prompt"), str):  # vLLM, completion form
            ids = _token_ids(body["prompt"])
            return web.json_response({"count": len(ids), "tokens": ids, "max_model_len": 262144})
        return _error(400, "expected 'content', 'prompt' or 'messages'")

    # -- chat ----------------------------------------------------------------------------------------------
    async def _recognise(self, messages: list[ChatMessage]) -> Question:
        # Stress phrasings need no datasets; only other prompts wait for the (once, lazily loaded) index.
        for t in user_texts(messages):
            q = stress_question(t) or judge_question(t)
            if q:
                return q
        if not indexed_names(self.s.data_dir):
            return Question("filler")
        if self._index_loading is None:
            self._index_loading = asyncio.get_running_loop().run_in_executor(None, self.index.ensure_loaded)
        await self._index_loading
        return recognise(messages, self.index)

    @web.middleware
    async def _stamp_arrival(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """Every request's (clock, perf_counter) arrival, taken before its handler runs: the kernel's receive stamp of
        its first bytes on a stamped connection (evalkit/sim/stamped_server.py), else now. Its body is read at once,
        so that bytes of a long body that came later are not taken for the next request's arrival."""
        now, now_perf = self.clock.now(), time.perf_counter()
        take = getattr(request.transport, "take_arrival", None)
        t = take() if take is not None else None
        request[ARRIVED] = (now, now_perf) if t is None or t > now else (t, now_perf - (now - t))
        if take is not None and request.can_read_body:
            await request.read()
            take()
        return await handler(request)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        arrived, arrived_perf = request[ARRIVED]
        arrival_index = self._arrivals
        self._arrivals += 1
        header_id = request.headers.get("X-Request-Id")
        rid = header_id or f"sim-{uuid.uuid4().hex[:16]}"
        body = await _json_body(request)
        stream = bool(body.get("stream")) if isinstance(body, dict) else False
        trace = RequestTrace(rid, arrival_index, arrived, stream)
        self.traces.append(trace)
        refused = refusal(self.s, header_id, body)
        if refused is not None:
            trace.end("error", self.clock.now())
            return web.Response(
                status=refused[0], text=refused[1] or None, content_type="application/json" if refused[1] else None
            )
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
            trace.end("error", self.clock.now())
            return _error(400, "body must be JSON with a non-empty 'messages' list")
        messages = [m for m in body["messages"] if isinstance(m, dict)]
        chat = cast(list[ChatMessage], messages)  # the same objects, read as chat messages
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        trace.max_tokens = max_tokens if isinstance(max_tokens, int) else None
        trace.prompt_tokens = prompt_tokens(messages)
        trace.message_digests = [_digest(f"{m.get('role')}\n{message_text(m.get('content'))}") for m in messages]
        thinking = decide(body, self.s.default_thinking == "on")
        trace.thinking = thinking.on
        fault = choose_fault(self.s, header_id or f"#{arrival_index}")
        question = await self._recognise(chat)
        trace.kind, trace.question_id = question.kind, question.qid
        if fault is not None and fault.kind == "http_500":
            trace.fault = fault.kind
            trace.end("error", self.clock.now())
            return _error(500, "simulated internal server error (fault http_500)")
        ignore_eos = bool(body.get("ignore_eos")) and "ignore_eos" not in self.s.ignore_fields
        asked_min = body.get("min_tokens")
        min_tokens = asked_min if isinstance(asked_min, int) else 0
        if "min_tokens" in self.s.ignore_fields:
            min_tokens = 0

        def make_output(batched: bool) -> Output:
            answer: str | None = None
            if question.kind != "filler":
                correct = True
                if question.kind == "capability":
                    assert question.qid is not None  # a capability question always has its id (questions._entry)
                    correct = unit_draw(self.s.seed, question.qid + _sample_key(body), "wrong") >= 1.0 - self.s.accuracy
                elif question.kind == "judge":  # a fallible judge: this verdict the wrong way round
                    correct = unit_draw(self.s.seed, *question.gold, "judge") >= self.s.judge_error_rate
                    trace.fault = None if correct else "judge_flipped"
                # The rate's draw is apart from the accuracy draw, so the same question at idle stays as it was.
                if (self.s.wrong_when_batched and batched) or (
                    batched
                    and question.kind == "capability"
                    and question.qid is not None  # always, for a capability question
                    and correct
                    and unit_draw(self.s.seed, question.qid + _sample_key(body), "batched")
                    < self.s.wrong_when_batched_rate
                ):
                    correct = False
                    trace.fault = trace.fault or "wrong_when_batched"
                trace.intended_correct = correct
                answer = answer_text(question, correct, self.s.seed)
                if self.s.chatty_tokens:  # a small model's answer, then prose before it stops on its own
                    answer += "".join(filler_tokens(self.s.chatty_tokens, offset=1))
            out = build_output(
                answer,
                thinking,
                self.s.reasoning_format,
                trace.max_tokens,
                ignore_eos,
                self.s.default_max_tokens,
                self.s.filler_tokens,
                min_tokens,
                self.s.never_stop,
            )
            # In the form the answer takes as the next turn's history, so the two digests compare directly.
            trace.answer_digest = _digest(f"assistant\n{out.content_text}")
            return out

        # A disconnect or stall is recorded when it strikes (a client may leave before it does).
        job = Job(
            trace,
            arrived_perf,
            trace.prompt_tokens,
            trace.prompt_tokens > self.s.long_threshold,
            make_output,
            lambda: request.transport is None or request.transport.is_closing(),
            fault,
            cache_tokens=chat_token_sequence(chat) if self.s.prefix_cache_blocks > 0 else None,
        )
        assert self.engine is not None
        self.engine.submit(job)
        if stream:
            return await self._stream(request, job, body)
        return await self._complete(job)

    async def _complete(self, job: Job) -> web.Response:
        trace = job.trace
        while True:
            msg = await job.outbox.get()
            if msg[0] == TOKEN and trace.first_token is None:
                trace.first_token = self.clock.now()
            elif msg[0] == CANCELLED:
                return _error(499, "request cancelled")
            elif msg[0] == KILLED:  # llama-cpp-python: an answer with nothing in it
                return web.json_response(
                    {
                        "id": f"chatcmpl-{trace.request_id}",
                        "object": "chat.completion",
                        "model": self.s.model,
                        "choices": [
                            {"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": None}
                        ],
                    }
                )
            elif msg[0] == END:
                break
        assert job.output is not None
        out = job.output
        trace.completion_tokens = len(out.tokens)
        trace.finish_reason = out.finish_reason
        message: dict[str, str] = {"role": "assistant", "content": out.content_text}
        if out.reasoning_text:
            message[self.s.reasoning_format] = out.reasoning_text
        resp = web.json_response(
            {
                "id": f"chatcmpl-{trace.request_id}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": self.s.model,
                "choices": [{"index": 0, "message": message, "finish_reason": out.finish_reason}],
                "usage": _usage(trace.prompt_tokens, len(out.tokens)),
                **({"timings": _timings(trace, len(out.tokens), self.clock.now())} if self.s.timings else {}),
            }
        )
        trace.end("ok", self.clock.now())
        return resp

    async def _stream(self, request: web.Request, job: Job, body: dict[str, Any]) -> web.StreamResponse:
        trace = job.trace
        resp = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",
                "X-Request-Id": trace.request_id,
            }
        )
        opts = body.get("stream_options") or {}
        include_usage = isinstance(opts, dict) and bool(opts.get("include_usage")) and self.s.stream_usage
        base = {
            "id": f"chatcmpl-{trace.request_id}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": self.s.model,
        }
        field = self.s.reasoning_format

        async def send(obj: _Chunk | str) -> None:
            data = obj if isinstance(obj, str) else json.dumps({**base, **obj}, separators=(",", ":"))
            await resp.write(f"data: {data}\n\n".encode())

        # Token chunks are the hot path: pre-encode everything around the token text.
        head = json.dumps(base, separators=(",", ":"))[:-1] + ',"choices":[{"index":0,"delta":{'
        tail = '},"finish_reason":null}]}\n\n'
        keys = {"content": '"content":', "reasoning": f'"{field}":'}

        streamed = 0  # tokens handed to the socket so far
        try:
            await resp.prepare(request)
            while True:
                msg = await job.outbox.get()
                kind = msg[0]
                if kind == PREFILLED:
                    await send(
                        {
                            "choices": [
                                {"index": 0, "delta": {"role": "assistant", "content": None}, "finish_reason": None}
                            ]
                        }
                    )
                elif kind == TOKEN:
                    _, channel, text = msg
                    chunk = f"data: {head}{keys[channel]}{json.dumps(text)}{tail}".encode()
                    if trace.first_token is None:
                        trace.first_token = self.clock.now()
                    if streamed == (job.output.answer_from if job.output is not None else 0):
                        trace.first_answer_token = self.clock.now()
                        trace.reasoning_tokens = streamed
                    streamed += 1
                    await resp.write(chunk)
                    trace.completion_tokens = job.emitted
                    if (
                        job.fault is not None
                        and job.fault.kind == "disconnect"
                        and job.output is not None
                        and job.emitted >= job.fault.at_token(len(job.output.tokens))
                    ):
                        trace.fault = job.fault.kind
                        trace.end("disconnected", self.clock.now())
                        job.write_failed = True  # the engine drops it at its next step
                        if request.transport is not None:
                            request.transport.close()  # FIN after the buffered tokens: the client sees them all
                        return resp
                elif kind == END:
                    trace.finish_reason = msg[1]
                    last: _Chunk = {"choices": [{"index": 0, "delta": {}, "finish_reason": msg[1]}]}
                    if self.s.timings:  # llama.cpp sends its timings with the finish chunk
                        last["timings"] = _timings(trace, job.emitted, self.clock.now())
                    if include_usage and self.s.usage_in_finish_chunk:  # FastLLM, transformers serve
                        last["usage"] = _usage(trace.prompt_tokens, job.emitted)
                    await send(last)
                    if include_usage and not self.s.usage_in_finish_chunk:
                        await send({"choices": [], "usage": _usage(trace.prompt_tokens, job.emitted)})
                    if self.s.done_marker:
                        await send("[DONE]")
                    await resp.write_eof()
                    trace.end("ok", self.clock.now())
                    return resp
                elif kind == CANCELLED:
                    return resp
                elif kind == KILLED:  # the stream just ends: no finish_reason, no [DONE]
                    await resp.write_eof()
                    return resp
        except _WRITE_ERRORS:
            job.write_failed = True
            trace.completion_tokens = job.emitted
            trace.end("cancelled", self.clock.now())
            return resp


def _timings(trace: RequestTrace, predicted: int, now: float) -> LlamaTimings:
    """llama.cpp's `timings`: prompt processing from its start until the first token, then generation; `cache_n`
    prompt tokens came from the prefix cache and `prompt_n` were computed."""
    start = trace.prefill_start if trace.prefill_start is not None else trace.arrived
    first = trace.first_token if trace.first_token is not None else now
    prompt_ms, predicted_ms = (first - start) * 1000, (now - first) * 1000
    computed = trace.prompt_tokens - trace.cached_tokens
    out: LlamaTimings = {
        "cache_n": trace.cached_tokens,
        "prompt_n": computed,
        "prompt_ms": prompt_ms,
        "prompt_per_token_ms": prompt_ms / max(1, computed),
        "prompt_per_second": computed / prompt_ms * 1000 if prompt_ms > 0 else None,
        "predicted_n": predicted,
        "predicted_ms": predicted_ms,
        "predicted_per_token_ms": predicted_ms / max(1, predicted),
        "predicted_per_second": predicted / predicted_ms * 1000 if predicted_ms > 0 else None,
    }
    if trace.draft_n:
        out["draft_n"], out["draft_n_accepted"] = trace.draft_n, trace.draft_n_accepted
    return out


def _sample_key(body: dict[str, Any]) -> str:
    """A sampled request (temperature above 0 with a `seed`) draws right or wrong anew per seed, as repeats of a real
    model at temperature do; greedy requests keep one verdict per question."""
    temperature, seed = body.get("temperature"), body.get("seed")
    if isinstance(temperature, (int, float)) and temperature > 0 and isinstance(seed, int):
        return f"#seed={seed}"
    return ""


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _token_ids(text: str) -> list[int]:
    return [zlib.crc32(t.encode()) % 151936 for t in tokenize(text)]


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": "evalkit_sim", "code": status}}, status=status)


async def _json_body(request: web.Request) -> Any:
    try:
        return json.loads(await request.read() or b"null")
    except (ValueError, UnicodeDecodeError):
        return None
