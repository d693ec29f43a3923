"""`evalkit sim`: run the simulated OpenAI-compatible inference server until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import gc
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from evalkit.config.argtypes import any_int, fraction, nonneg_float, nonneg_int, port, positive_float, positive_int
from evalkit.errors import UsageError
from evalkit.sim.profiles import PROFILES, profile_settings
from evalkit.sim.settings import REASONING_FORMATS, SimSettings, field_names

EPILOG = """\
engine model (all durations divided by --time-scale):
  prefill runs at --prefill-rate tok/s in --prefill-chunk chunks; decode gives each running request one token
  per step, a step lasting b/R(b) for b requests, R going linearly from --decode-rate (one stream) to
  --batch-decode-rate (full batch). --max-batch slots; --clamp-batch silently serves one at a time and logs
  "explicit-token safety max_batch limited N -> 1" once at start-up. Prompts longer than --long-threshold are
  long: with --no-yield their prefill runs every chunk back to back (head-of-line blocking); with --yield the
  engine admits queued short requests between chunks and runs --yield-decode-steps decode steps per chunk.
  A client that disconnects is noticed between chunks/steps; --cancel-aborts stops its prefill at the next chunk
  boundary, --no-cancel-aborts lets the prefill run on. Events at GET /sim/events are the ground truth.

token rule: tokens = re.findall(r"\\s*\\w+|\\s*[^\\w\\s]", text); a chat prompt costs sum(tokens(content) + 4)
  over messages, plus 2; every streamed chunk is one token.

answers: capability questions (GSM8K, MATH-500, MuSR, HumanEval+ from --data-dir / $EVALKIT_DATA_DIR) get a
  correct answer in one of several styles, or a wrong one for a fraction 1 - --accuracy chosen by hashing the
  question id with --seed; stress questions get their known answer; a judge's equality-check prompt (capability
  --judge-url) gets Yes, No or Unsure by comparing its reference with the response's last line (a fraction
  --judge-error-rate flipped); anything else gets filler.
  "ignore_eos": true pads to max_tokens; --never-stop is a model that never ends a reply on its own (a random 8B):
  every reply runs to max_tokens either way, so a forced length cannot be told from none. Thinking
  (enable_thinking, reasoning_effort, /think) streams reasoning first in --reasoning-format; effort low/medium/high
  ~60/150/300 tokens.

profiles: dual-2080ti-before (1 slot, no yield, cancel not aborting, 100 tok/s, 54K prefill ~40 s) and
  dual-2080ti-after (2 slots, 116/186 tok/s, yield every 1536-token chunk ~1.15 s, cancel aborting);
  strict-transformers: a strict OpenAI-only server like `transformers serve` (422 on unknown fields, no [DONE],
  usage in the finish chunk, 404 on /metrics /tokenize /props, one pinned model, no timings);
  degrade-under-batch: 4 slots, a capability answer spoilt with probability 0.5 when another request shares its
  batch (--wrong-when-batched-rate); reasoning: thinks before every answer unless the request turns it off.
  Flags given explicitly override the profile.

prefix cache: --prefix-cache-blocks N keeps a block-hash LRU of N blocks of --prefix-block-tokens; a request's cached
  leading blocks are not prefilled again (timings.cache_n, /sim/events cached_tokens); POST /reset_prefix_cache
  empties it.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of `evalkit sim`; defaults are None so a profile can fill what the user did not set."""
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = EPILOG
    d = SimSettings()
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=port, default=8000, help="port; 0 picks a free one (default 8000)")
    p.add_argument("--profile", choices=sorted(PROFILES), help="preset engine figures from the reference write-up")
    p.add_argument("--model", help=f"model id served (default {d.model})")
    p.add_argument("--data-dir", help="local copies of the capability datasets (default $EVALKIT_DATA_DIR)")
    p.add_argument(
        "--eval",
        dest="evals",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="also recognise and answer a user eval file's questions (as `capability --eval`); repeatable",
    )
    p.add_argument("--time-scale", type=positive_float, help="run everything F times faster (default 1)")
    g = p.add_argument_group("engine")
    g.add_argument("--prefill-rate", type=positive_float, help=f"prefill tokens/s (default {d.prefill_rate:g})")
    g.add_argument("--prefill-chunk", type=positive_int, help=f"tokens per prefill chunk (default {d.prefill_chunk})")
    g.add_argument(
        "--decode-rate", type=positive_float, help=f"decode tokens/s of one stream (default {d.decode_rate:g})"
    )
    g.add_argument(
        "--batch-decode-rate",
        type=positive_float,
        help=f"combined decode tokens/s with every slot busy (default {d.batch_decode_rate:g})",
    )
    g.add_argument(
        "--decode-jitter",
        type=float,
        metavar="SIGMA",
        help="each request decodes at its rate times exp(SIGMA * z), z drawn per request from --seed (a jittery "
        "server; the median rate stays --decode-rate; default 0)",
    )
    g.add_argument("--max-batch", type=positive_int, help=f"concurrent requests (default {d.max_batch})")
    g.add_argument(
        "--clamp-batch",
        action="store_true",
        default=None,
        help="fault: serve one request at a time whatever --max-batch says, logging one line",
    )
    g.add_argument(
        "--yield",
        dest="yield_prefill",
        action="store_true",
        default=None,
        help="long prefill yields between chunks (default)",
    )
    g.add_argument(
        "--no-yield",
        dest="yield_prefill",
        action="store_false",
        help="long prefill runs all its chunks first (head-of-line blocking)",
    )
    g.add_argument(
        "--yield-decode-steps",
        type=nonneg_int,
        help=f"decode steps between two chunks of a long prefill (default {d.yield_decode_steps})",
    )
    g.add_argument(
        "--long-threshold", type=nonneg_int, help=f"prompts longer than this are long (default {d.long_threshold})"
    )
    g.add_argument(
        "--cancel-aborts",
        dest="cancel_aborts",
        action="store_true",
        default=None,
        help="cancel stops prefill at the next chunk boundary (default)",
    )
    g.add_argument(
        "--no-cancel-aborts",
        dest="cancel_aborts",
        action="store_false",
        help="a cancelled prefill runs to the end, occupying the engine",
    )
    g.add_argument(
        "--default-max-tokens", type=positive_int, help=f"limit when a request names none ({d.default_max_tokens})"
    )
    g.add_argument(
        "--filler-tokens",
        type=nonneg_int,
        help=f"filler length when a request names no max_tokens (default {d.filler_tokens})",
    )
    a = p.add_argument_group("answers and thinking")
    a.add_argument("--accuracy", type=fraction, help="fraction of capability questions answered right (default 1.0)")
    a.add_argument(
        "--judge-error-rate",
        type=fraction,
        help="fraction of judge verdicts (equality-check prompts) answered the wrong way round (default 0)",
    )
    a.add_argument("--seed", type=any_int, help="seed for wrong answers, styles and faults (default 0)")
    a.add_argument("--reasoning-format", choices=REASONING_FORMATS, help="how reasoning is streamed")
    a.add_argument("--default-thinking", choices=("off", "on"), help="thinking when the request does not say")
    f = p.add_argument_group("faults (chosen per request from --seed and its X-Request-Id)")
    f.add_argument("--fail-rate", type=fraction, help="fraction answered HTTP 500 before streaming")
    f.add_argument("--disconnect-rate", type=fraction, help="fraction whose connection is dropped mid-stream")
    f.add_argument("--stall-rate", type=fraction, help="fraction whose stream pauses mid-way")
    f.add_argument("--stall-s", type=nonneg_float, help="length of a stall in model seconds (default 5)")
    f.add_argument(
        "--wrong-when-batched",
        action="store_true",
        default=None,
        help="answer wrong whenever the batch holds more than one request",
    )
    f.add_argument(
        "--wrong-when-batched-rate",
        type=fraction,
        help="capability answers go wrong with this probability when the batch holds another request (default 0)",
    )
    q = p.add_argument_group("real servers' quirks (for evalkit check and the client's fallbacks)")
    q.add_argument(
        "--uuid-request-ids",
        action="store_true",
        default=None,
        help="answer a bare HTTP 400 to an X-Request-Id that is not a UUID (llama-cpp-python)",
    )
    q.add_argument(
        "--reject-fields",
        type=lambda v: tuple(x for x in v.split(",") if x),
        help="comma-separated body fields answered with HTTP 400 naming the field",
    )
    q.add_argument(
        "--ignore-fields",
        type=lambda v: tuple(x for x in v.split(",") if x),
        help="comma-separated body fields taken (HTTP 200) but given no effect, e.g. ignore_eos,min_tokens",
    )
    q.add_argument(
        "--chatty-tokens",
        type=nonneg_int,
        metavar="N",
        help="a model that talks on: each recognised answer runs N tokens of prose more before it stops",
    )
    q.add_argument(
        "--never-stop",
        action="store_true",
        default=None,
        help="a model that never ends a reply on its own (a random-weights model): every reply, recognised or not, "
        "runs to max_tokens (else to the default cap) and finishes 'length', with or without ignore_eos",
    )
    q.add_argument(
        "--no-stream-usage",
        dest="stream_usage",
        action="store_false",
        default=None,
        help="ignore stream_options.include_usage (no usage chunk)",
    )
    q.add_argument(
        "--no-tokenize", dest="tokenize_endpoint", action="store_false", default=None, help="no POST /tokenize (404)"
    )
    q.add_argument(
        "--strict-fields",
        action="store_true",
        default=None,
        help="answer HTTP 422 with a pydantic-style extra_forbidden body to any body field OpenAI's chat "
        "API does not define (ignore_eos, min_tokens, chat_template_kwargs, ...)",
    )
    q.add_argument(
        "--no-done", dest="done_marker", action="store_false", default=None, help="end a stream without `data: [DONE]`"
    )
    q.add_argument(
        "--usage-in-finish-chunk",
        action="store_true",
        default=None,
        help="send usage inside the finish chunk, not in a chunk of its own",
    )
    q.add_argument(
        "--openai-only",
        action="store_true",
        default=None,
        help="404 on every non-OpenAI endpoint (/metrics, /tokenize, /props); /sim/* stay served",
    )
    q.add_argument(
        "--pin-model",
        action="store_true",
        default=None,
        help="answer HTTP 400 to a request naming another model than --model",
    )
    e = p.add_argument_group("what the server says (metrics, speculative decoding, log)")
    e.add_argument(
        "--no-metrics",
        dest="metrics",
        action="store_false",
        default=None,
        help="no GET /metrics (404); by default it serves vLLM-named Prometheus metrics",
    )
    e.add_argument(
        "--spec-accept",
        type=_accept,
        metavar="A0,A1,..",
        help="speculative decoding: acceptance per draft position, e.g. 0.872,0.744,0.609 (draft length "
        "= number of values); --decode-rate is then verify passes/s, each giving 1 + accepted tokens",
    )
    e.add_argument(
        "--spec-metric-names",
        choices=("vllm", "llamacpp"),
        help="name the speculative-decoding counters as vLLM (vllm:spec_decode_*, default) or llama.cpp "
        "(llamacpp:spec_decode_*) does",
    )
    e.add_argument(
        "--context-tokens",
        type=positive_int,
        help="context per request, told in the start-up log line; "
        f"a longer prompt gets HTTP 400 (default {d.context_tokens})",
    )
    e.add_argument(
        "--server-log-file",
        dest="server_log",
        metavar="FILE",
        help="write the server's log lines (start-up clamp and context lines, ...) to FILE",
    )
    r = p.add_argument_group("engine behaviours seen on real servers (ground truth in /sim/events)")
    r.add_argument(
        "--cancel-batch-tokens",
        type=positive_int,
        metavar="B",
        help="with --cancel-aborts, a cancel is honoured only at the end of the current prefill batch of "
        "B tokens (llama.cpp's -b); 0 = at the next chunk (default)",
    )
    r.add_argument(
        "--housekeeping-s-per-token",
        type=nonneg_float,
        metavar="S",
        help="after a request ends the engine stores its state for S model seconds per context token, "
        "doing nothing else (llama.cpp's prompt-cache store: ~5 s after 54K tokens, S=9.3e-5)",
    )
    r.add_argument(
        "--kill-on-new-request",
        action="store_true",
        default=None,
        help="a new request ends the stream in progress: HTTP 200, no more content, no finish_reason "
        "(llama-cpp-python's server)",
    )
    r.add_argument(
        "--no-timings",
        dest="timings",
        action="store_false",
        default=None,
        help="no llama.cpp-style `timings` in the last chunk",
    )
    r.add_argument(
        "--step-tokens",
        type=int,
        metavar="B",
        help="llama.cpp's shared steps (-b B with several slots): every admitted request is launched into "
        "a slot at once, and each step takes up to B tokens, one per decoding request and then the "
        "prompts in launch order: a request launched behind a long prompt waits in its slot",
    )
    r.add_argument(
        "--idle-slot-save-s-per-token",
        dest="idle_save_s_per_token",
        type=float,
        metavar="S",
        help="at each launch the engine stores every idle slot's unsaved state for S model seconds per "
        "token, doing nothing else, with no log line (llama.cpp's --cache-idle-slots)",
    )
    r.add_argument(
        "--trace-log",
        action="store_true",
        default=None,
        help="also write llama.cpp's trace-level lines (-lv 4), such as 'saving idle slot to prompt cache'",
    )
    r.add_argument(
        "--log-timestamps",
        action="store_true",
        default=None,
        help="prefix each log line with llama.cpp's own timestamp (minutes.seconds.ms.us since start)",
    )
    r.add_argument(
        "--step-gauges",
        action="store_true",
        default=None,
        help="/metrics' running/waiting gauges change only when an engine step ends, as vLLM's do: during "
        "a long prefill step they read what they read before it",
    )
    c = p.add_argument_group("prefix cache (hits per request in /sim/events as cached_tokens)")
    c.add_argument(
        "--prefix-cache-blocks",
        type=nonneg_int,
        metavar="N",
        help="a block-hash prefix cache holding N blocks, least recently used evicted first; a hit shortens "
        "the prefill and is reported as timings.cache_n (default 0: no cache)",
    )
    c.add_argument(
        "--prefix-block-tokens",
        type=positive_int,
        metavar="B",
        help=f"tokens per prefix-cache block (default {d.prefix_block_tokens})",
    )


def _accept(text: str) -> tuple[float, ...]:
    from evalkit.sim.metrics import parse_accept

    try:
        return parse_accept(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{text!r}: {e}") from None


def settings_from_flags(profile: str | None, given: Mapping[str, Any]) -> SimSettings:
    """Defaults, then the profile, then every setting the user gave (`given`: flag values by setting name, None for
    a flag not given)."""
    values: dict[str, Any] = profile_settings(profile)
    for name in field_names():
        v = given.get(name)
        if v is not None:
            values[name] = v
    s = SimSettings(**values)
    _check(s)
    return s


def _check(s: SimSettings) -> None:
    positive = {
        "time_scale": s.time_scale,
        "prefill_rate": s.prefill_rate,
        "decode_rate": s.decode_rate,
        "batch_decode_rate": s.batch_decode_rate,
        "prefill_chunk": s.prefill_chunk,
        "max_batch": s.max_batch,
    }
    for name, v in positive.items():
        if v <= 0:
            raise UsageError(f"--{name.replace('_', '-')} must be positive")
    if not 0 <= s.decode_jitter <= 2:
        raise UsageError("--decode-jitter must be between 0 and 2 (a log-normal sigma)")
    for name in (
        "accuracy",
        "judge_error_rate",
        "fail_rate",
        "disconnect_rate",
        "stall_rate",
        "wrong_when_batched_rate",
    ):
        v = getattr(s, name)
        if not 0.0 <= v <= 1.0:
            raise UsageError(f"--{name.replace('_', '-')} must be between 0 and 1")
    if s.cancel_batch_tokens < 0 or s.housekeeping_s_per_token < 0 or s.step_tokens < 0 or s.idle_save_s_per_token < 0:
        raise UsageError(
            "--cancel-batch-tokens, --housekeeping-s-per-token, --step-tokens and "
            "--idle-slot-save-s-per-token must not be negative"
        )
    if s.fail_rate + s.disconnect_rate + s.stall_rate > 1.0:
        raise UsageError("--fail-rate + --disconnect-rate + --stall-rate must not exceed 1")


async def _serve(settings: SimSettings, host: str, port: int) -> None:
    from aiohttp import web

    from evalkit.client import kernel_stamps
    from evalkit.clock import Clock
    from evalkit.sim.server import SimServer
    from evalkit.sim.stamped_server import serve_stamped

    server = SimServer(settings, Clock.from_env())
    runner = web.AppRunner(server.app(), access_log=None, handle_signals=False)
    await runner.setup()
    assert runner.server is not None  # set by setup()
    listener = None
    try:
        if kernel_stamps.available():
            # Requests stamped `arrived` when the kernel received them (evalkit/sim/stamped_server.py).
            listener = await serve_stamped(runner.server, host, port, server.clock)
            sockets = listener.sockets
        else:
            site = web.TCPSite(runner, host, port)
            await site.start()
            sockets = list(cast("asyncio.Server", site._server).sockets) if site._server else []
    except OSError as e:
        await runner.cleanup()
        raise UsageError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    real_port = sockets[0].getsockname()[1] if sockets else port
    if settings.clamp_batch and settings.max_batch > 1:
        sys.stderr.write(f"explicit-token safety max_batch limited {settings.max_batch} -> 1\n")
        sys.stderr.flush()
    # The sim's timestamps are the ground truth: a full garbage collection walking every object made at start-up
    # paused the loop for ~5 ms now and then, stamping arrivals late. Those objects live as long as the process.
    gc.freeze()
    print(f"evalkit sim listening on http://{host}:{real_port}/v1", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        if listener is not None:
            listener.close()
        await runner.cleanup()


def run(args: argparse.Namespace) -> int:
    """Run `evalkit sim` until SIGTERM or SIGINT."""
    settings = settings_from_flags(args.profile, vars(args))
    if args.evals:
        from evalkit_evals import registry
        from evalkit_evals.user_eval import load_user_eval

        for path in args.evals:
            ev = load_user_eval(path)
            ev.load(None)  # renders every row's prompt and answer: a template the sandbox refuses is exit 2 now
            registry.register(ev)
    asyncio.run(_serve(settings, args.host, args.port))
    return 0
