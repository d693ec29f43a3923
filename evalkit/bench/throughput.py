"""Throughput bench: three prompts at temperature 0, fixed completion length, median of client-timed rates.

Rates (every one from client timestamps of one `Clock`):
- decode tok/s, the headline: (completion_tokens - 1) / (last token - first token) of one request. The first
  token's wait (queueing, prefill) is left out, so this is the speed a reader watches the text appear.
- request tok/s: completion_tokens / (done - sent), the whole request with its prefill.
- combined tok/s for N concurrent streams: (sum of completion_tokens - 1) / (latest last token - earliest first
  token), i.e. every token the streams produced over the union of their decode windows. A stream that waits for
  the other's prefill, or finishes early, lowers it: that is the point, it is what the server delivers together.
Every prompt asks for `max_tokens` tokens with `ignore_eos` so all runs decode the same length; a server where the
preflight did not see it honoured gets `min_tokens` when that is, else the prompts run to max_tokens on their own
(`length_mode` "prompt", the summary says why, `length_why`). Whether the length was forced is one of three states
(`length_state`, evalkit.client.field_support): `forced` (each request's `length_forced` true), `sent_not_observable`
(ignore_eos sent, its effect could not be observed with this model, which runs to max_tokens without it too:
`length_forced` null) and `not_forced` (false); a run that stops short anyway is listed in `stopped_early`. Failed
requests are counted per prompt (`failed`), never shown as a rate.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any, TypedDict, cast

from evalkit.bench.until_sure import RateCheck, RateSureJson, rate_check
from evalkit.client.chat import ChatClient, ChatRequest, new_request_id
from evalkit.client.field_support import FORCED, length_forced_flag
from evalkit.config.profiles import read_toml
from evalkit.errors import UsageError
from evalkit.runs.rundir import REQUESTS, Line, RunDir, read_jsonl
from evalkit.stats import median, union_length

DEFAULT_PROMPTS = ("code", "math", "prose")

# A bench request's labels (a warm-up's phase and run; a measurement's key, prompt and, in a concurrent try, its
# stream and try id), written on its requests.jsonl line.
_BenchTags = TypedDict(
    "_BenchTags", {"bench_key": str, "phase": str, "prompt": str, "run": int, "stream": int, "try": str}, total=False
)


# A requests.jsonl line as the bench reads it back (evalkit.runs.records.RequestRecord.to_json with the labels
# above): the fields its figures use. `t_done` is always stamped by the client; the server's `timings` only where
# it sends them (llama.cpp).
BenchLine = TypedDict(
    "BenchLine",
    {
        "request_id": str,
        "status": str,
        "error": "str | None",
        "bench_key": str,
        "phase": str,
        "prompt": str,
        "run": int,
        "stream": int,
        "try": str,
        "t_sent": float,
        "t_first_token": "float | None",
        "t_last_token": "float | None",
        "t_done": float,
        "completion_tokens": "int | None",
        "reasoning_tokens": "int | None",
        "answer_tokens": "int | None",
        "finish_reason": "str | None",
        "ttft_s": "float | None",
        "ttft_answer_s": "float | None",
        "decode_tok_s": "float | None",
        "request_tok_s": "float | None",
        "server_timings": "dict[str, float | None] | None",
    },
    total=False,
)


def bench_lines(lines: list[dict[str, Any]]) -> list[BenchLine]:
    """requests.jsonl's lines (`RunDir.read`) as the bench reads them: the same objects, typed."""
    return cast(list[BenchLine], lines)


class _PromptRates(TypedDict):
    tok_s: float | None
    runs: list[float]
    request_tok_s: float | None
    request_runs: list[float]
    ttft_s: float | None
    ttft_answer_s: float | None
    reasoning_tokens: float | None
    answer_tokens: float | None
    completion_tokens: list[int | None]
    server_tok_s: float | None
    failed: int


class BenchPromptJson(_PromptRates, total=False):
    """A bench summary's per-prompt block (`summarize`; `BenchPrompt` reads it), in the order written: the rates,
    then evalkit's rate against the server's and, with --until-sure, how sure the median is."""

    vs_server: float | None
    until_sure: RateSureJson


class _StreamRates(TypedDict):
    streams: int
    prompt: str
    combined_tok_s: float | None
    runs: list[float]
    combined_request_tok_s: float | None
    request_runs: list[float]
    per_stream_tok_s: list[float | None]
    per_stream_runs: list[list[float]]
    failed: int


class BenchConcurrentJson(_StreamRates, total=False):
    """A bench summary's `concurrent` block (`summarize`; `BenchConcurrent` reads it), in the order written."""

    server_combined_tok_s: float | None
    vs_server: float | None
    until_sure: RateSureJson


class BenchUntilSureJson(TypedDict):
    """A bench summary's `until_sure` block (`BenchUntilSure` reads it): the rule and the run's decision."""

    margin: float | None
    min_runs: int
    max_runs: int
    decided: bool
    undecided: list[str]


@dataclass(frozen=True)
class NamedPrompt:
    """A named prompt sent as one user message."""

    name: str
    text: str


@dataclass(frozen=True)
class BenchPlan:
    """What one bench run measures."""

    prompts: tuple[NamedPrompt, ...]
    runs: int = 3
    max_tokens: int = 512
    concurrency: int = 1
    ignore_eos: bool = True
    warmup: int = 1
    # What forces the length on this server (evalkit.client.field_support.length_fields): its fields and the mode.
    length_body: tuple[tuple[str, Any], ...] = ()
    length_mode: str = "ignore_eos"
    timeout_s: float = 300.0  # per request: a stream that never ends is a `timeout`, not a silent wait
    length_why: str = ""  # with length_mode "prompt": why (field_support.unforced_words)
    length_state: str = FORCED  # field_support.length_state: forced, sent_not_observable or not_forced
    # `--until-sure`: measure a prompt again until its median is sure within ±margin, `runs` to `max_runs` times
    until_sure_margin: float | None = None
    max_runs: int | None = None

    @property
    def most_runs(self) -> int:
        """The runs a prompt may get: `max_runs` with --until-sure, else `runs`."""
        return self.max_runs if self.until_sure_margin is not None and self.max_runs else self.runs

    def keys(self) -> list[str]:
        """Every measurement's key in the order it is taken: singles first, then concurrent groups."""
        n = self.most_runs
        singles = [f"single:{p.name}:{i}" for i in range(1, n + 1) for p in self.prompts]
        groups = [f"concurrent:{i}" for i in range(1, n + 1)] if self.concurrency > 1 else []
        return singles + groups

    def sure(self, lines: list[BenchLine], key: str) -> bool:
        """With --until-sure: whether the measurement `key` is no longer needed, its prompt (or the concurrent
        streams) already sure from `lines` (never before `runs` runs)."""
        if self.until_sure_margin is None or int(key.rsplit(":", 1)[1]) <= self.runs:
            return False
        return sure_rates(lines, self)[key.split(":")[1] if key.startswith("single:") else "concurrent"].sure


def packaged_prompts() -> list[NamedPrompt]:
    """The three packaged prompts: code with heavy comments and explanation, math, prose."""
    base = files("evalkit_prompts") / "bench"
    return [NamedPrompt(n, (base / f"{n}.txt").read_text(encoding="utf-8").strip()) for n in DEFAULT_PROMPTS]


def load_prompts(path: Path) -> list[NamedPrompt]:
    """A user's prompts: TOML `[[prompt]] name=.. text=..`, or JSONL lines `{"name": .., "prompt": ..}`."""
    if not path.is_file():
        raise UsageError(f"prompts file not found: {path}")
    if path.suffix == ".toml":
        raw = read_toml(path).get("prompt")
        items = [(r.get("name"), r.get("text")) for r in raw] if isinstance(raw, list) else []
    else:
        try:
            lines = read_jsonl(path)
        except json.JSONDecodeError as e:
            raise UsageError(f"{path}: not JSONL ({e})") from None
        items = [(r.get("name"), r.get("prompt", r.get("text"))) for r in lines]
    prompts = []
    for i, (name, text) in enumerate(items, 1):
        if not isinstance(name, str) or not name or not isinstance(text, str) or not text.strip():
            raise UsageError(f"{path}: prompt {i} needs a non-empty name and text")
        prompts.append(NamedPrompt(name, text.strip()))
    if not prompts:
        raise UsageError(f"{path}: no prompts ([[prompt]] tables in TOML, or JSONL lines with name and prompt)")
    if len({p.name for p in prompts}) != len(prompts):
        raise UsageError(f"{path}: prompt names must be unique")
    return prompts


def _request(plan: BenchPlan, prompt: NamedPrompt, tags: _BenchTags) -> ChatRequest:
    body = dict(plan.length_body)  # over the client's standing body (the profile's extra_body)
    # length_forced: true where the server honours what was sent to force max_tokens (the preflight saw it); null
    # where ignore_eos was sent and its effect could not be observed with this model; else false, the length rests on
    # the prompt running long, and the figures are marked.
    labels = {**tags, "length_mode": plan.length_mode, "length_forced": length_forced_flag(plan.length_state)}
    return ChatRequest(
        messages=[{"role": "user", "content": prompt.text}],
        max_tokens=plan.max_tokens,
        temperature=0.0,
        extra_body=body,
        request_id=new_request_id("bench"),
        tags=labels,
        timeout_s=plan.timeout_s,
    )


def _completed(lines: list[BenchLine], plan: BenchPlan) -> set[str]:
    return set(_split(lines)[0])


async def run_bench(
    client: ChatClient,
    rundir: RunDir,
    plan: BenchPlan,
    on_done: Callable[[int], None],
    mark: Callable[[str], Awaitable[None]] | None = None,
) -> None:
    """Take every measurement not already in `requests.jsonl` (a resumed run skips what it has).

    `mark("before:<prompt>")` and `mark("after:<prompt>")` run around each measurement (server metrics windows).
    """
    done = _completed(bench_lines(rundir.read(REQUESTS)), plan)
    by_name = {p.name: p for p in plan.prompts}
    # Warm-up requests are sent and thrown away: a first request pays one-off costs on both sides (connection
    # setup, lazy imports, a server's graph capture or cache fill) that bunch up its token arrivals.
    for i in range(plan.warmup if len(done) < len(plan.keys()) else 0):
        warm = _request(plan, plan.prompts[0], {"phase": "warmup", "run": i + 1})
        rec = await client.chat(ChatRequest(**{**warm.__dict__, "max_tokens": min(plan.max_tokens, 32)}))
        rundir.append(REQUESTS, rec.to_json())  # kept for the record; it has no bench_key, so no rate uses it
    skipped = sum(plan.concurrency if k.startswith("concurrent:") else 1 for k in done)
    if skipped:
        on_done(skipped)
    for key in plan.keys():  # noqa: SIM118 - BenchPlan.keys() is its own method, not a dict's
        if key in done:
            continue
        if plan.sure(bench_lines(rundir.read(REQUESTS)), key):  # --until-sure: this prompt's median is already sure
            on_done(plan.concurrency if key.startswith("concurrent:") else 1)
            continue
        if key.startswith("single:"):
            _, name, run = key.split(":")
            reqs = [
                _request(plan, by_name[name], {"bench_key": key, "phase": "single", "prompt": name, "run": int(run)})
            ]
        else:
            run = key.split(":")[1]
            first = plan.prompts[0]
            group = new_request_id("try")  # the streams sent together: a measurement is one try's streams, all ok
            reqs = [
                _request(
                    plan,
                    first,
                    {
                        "bench_key": key,
                        "phase": "concurrent",
                        "prompt": first.name,
                        "run": int(run),
                        "stream": s,
                        "try": group,
                    },
                )
                for s in range(plan.concurrency)
            ]
        window = reqs[0].tags["prompt"] if key.startswith("single:") else "concurrent"
        if mark is not None:
            await mark(f"before:{window}")
        records = await asyncio.gather(*(client.chat(r) for r in reqs))
        if mark is not None:
            await mark(f"after:{window}")
        for rec in records:
            rundir.append(REQUESTS, rec.to_json())
        on_done(len(records))


def sure_rates(lines: list[BenchLine], plan: BenchPlan) -> dict[str, RateCheck]:
    """Per prompt (and "concurrent"), how sure its median rate is from the measurements in `lines`."""
    done = _split(lines)[0]
    margin = plan.until_sure_margin or 0.0
    out = {}
    for p in plan.prompts:
        keys = sorted((k for k in done if k.startswith(f"single:{p.name}:")), key=lambda k: int(k.rsplit(":", 1)[1]))
        mine = [done[k][0] for k in keys]
        out[p.name] = rate_check([r for x in mine if (r := x.get("decode_tok_s"))], margin, plan.runs)
    groups = [g for k, g in done.items() if k.startswith("concurrent:") and len(g) == plan.concurrency]
    combined = [c for c in (combined_rates(g)[0] for g in groups) if c is not None]
    out["concurrent"] = rate_check(combined, margin, plan.runs)
    return out


def combined_rates(group: list[BenchLine]) -> tuple[float | None, float | None]:
    """(combined decode tok/s over the union of decode windows, combined tok/s over the union of request windows)."""
    tokens = sum(g.get("completion_tokens") or 0 for g in group)
    firsts = [t for g in group if (t := g.get("t_first_token")) is not None]
    lasts = [t for g in group if (t := g.get("t_last_token")) is not None]
    decode = None
    if firsts and lasts and max(lasts) > min(firsts) and tokens > 1:
        decode = (tokens - 1) / (max(lasts) - min(firsts))
    span = max(g["t_done"] for g in group) - min(g["t_sent"] for g in group)
    return decode, (tokens / span if span > 0 else None)


def server_rate(lines: list[BenchLine]) -> float | None:
    """Median of the server's own decode rate (llama.cpp `timings.predicted_per_second`) over `lines`, if it sent
    one."""
    return median([r for x in lines if (r := (x.get("server_timings") or {}).get("predicted_per_second"))])


def server_combined_rate(group: list[BenchLine]) -> float | None:
    """The streams' tokens over the union of their decode windows as the server timed them, if it did.

    Each stream's window is its `predicted_ms`, ending when its last token arrived: streams decoded in one batch
    give about the sum of their rates, streams that took turns (one slot) the rate of one.
    """
    spans = []
    tokens = 0
    for x in group:
        t = x.get("server_timings") or {}
        ms, n, last = t.get("predicted_ms"), t.get("predicted_n"), x.get("t_last_token")
        if not ms or not n or last is None:
            return None
        spans.append((last - ms / 1000.0, last))
        tokens += int(n)
    union = union_length(spans)
    return tokens / union if union > 0 else None


def _vs(ours: float | None, theirs: float | None) -> float | None:
    return ours / theirs - 1 if ours and theirs else None


def measurements(lines: list[dict[str, Any]]) -> tuple[dict[str, list[Line]], dict[str, list[Line]]]:
    """(done, failed) per `bench_key`: the last try whose lines are all ok, and for a key without one the failed
    lines of its last try. A try is one request, or the streams sent together (`try`); a resume retries a failed
    key whole, so a concurrent figure never mixes streams of two tries."""
    done, failed = _split(bench_lines(lines))
    return cast(dict[str, list[Line]], done), cast(dict[str, list[Line]], failed)


def _split(lines: list[BenchLine]) -> tuple[dict[str, list[BenchLine]], dict[str, list[BenchLine]]]:
    tries: dict[str, dict[str | None, list[BenchLine]]] = {}
    for x in lines:
        key = x.get("bench_key")
        if key:
            # Lines written before tries were tagged: a single's each line, a concurrent key's all its lines.
            tag = x.get("try") or (x.get("request_id") if x.get("phase") == "single" else None)
            tries.setdefault(key, {}).setdefault(tag, []).append(x)
    done: dict[str, list[BenchLine]] = {}
    failed: dict[str, list[BenchLine]] = {}
    for key, by_try in tries.items():
        whole = [t for t in by_try.values() if all(x.get("status") == "ok" for x in t)]
        if whole:
            done[key] = whole[-1]
        else:
            failed[key] = [x for x in list(by_try.values())[-1] if x.get("status") != "ok"]
    return done, failed


def left_failed(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The failed lines still standing: each key's last try when no try of it succeeded whole."""
    return [x for t in measurements(lines)[1].values() for x in t]


def summarize(lines: list[dict[str, Any]], plan: BenchPlan) -> dict[str, Any]:
    """summary.json from requests.jsonl (contract shape plus request rates, TTFT and early stops)."""
    read = bench_lines(lines)
    done, left = _split(read)
    ok = [x for t in done.values() for x in t]  # a re-measured key keeps its last whole try
    failed_lines = [x for t in left.values() for x in t]
    prompts: dict[str, BenchPromptJson] = {}
    for p in plan.prompts:
        mine = sorted(
            (x for x in ok if x.get("phase") == "single" and x.get("prompt") == p.name), key=lambda x: x.get("run", 0)
        )
        runs = [r for x in mine if (r := x.get("decode_tok_s")) is not None]
        req = [r for x in mine if (r := x.get("request_tok_s")) is not None]
        entry: BenchPromptJson = {
            "tok_s": median(runs),
            "runs": runs,
            "request_tok_s": median(req),
            "request_runs": req,
            "ttft_s": median([t for x in mine if (t := x.get("ttft_s")) is not None]),
            # After any reasoning: the first token of the answer itself, and the completion split in two.
            "ttft_answer_s": median([t for x in mine if (t := x.get("ttft_answer_s")) is not None]),
            "reasoning_tokens": median([n for x in mine if (n := x.get("reasoning_tokens")) is not None]),
            "answer_tokens": median([n for x in mine if (n := x.get("answer_tokens")) is not None]),
            "completion_tokens": [x.get("completion_tokens") for x in mine],
            # What the server says it did (None when it sends no timings), and evalkit's rate against it.
            "server_tok_s": server_rate(mine),
            "failed": sum(x.get("phase") == "single" and x.get("prompt") == p.name for x in failed_lines),
        }
        entry["vs_server"] = _vs(entry["tok_s"], entry["server_tok_s"])
        prompts[p.name] = entry
    concurrent: BenchConcurrentJson | None = None
    if plan.concurrency > 1:
        groups: dict[int, list[BenchLine]] = {}
        for x in ok:
            if x.get("phase") == "concurrent":
                groups.setdefault(x.get("run", 0), []).append(x)
        full = [
            sorted(g, key=lambda x: x.get("stream", 0)) for _, g in sorted(groups.items()) if len(g) == plan.concurrency
        ]
        combined = [c for c in (combined_rates(g)[0] for g in full) if c is not None]
        combined_req = [c for c in (combined_rates(g)[1] for g in full) if c is not None]
        per_stream = [[r for g in full if (r := g[s].get("decode_tok_s")) is not None] for s in range(plan.concurrency)]
        concurrent = {
            "streams": plan.concurrency,
            "prompt": plan.prompts[0].name,
            "combined_tok_s": median(combined),
            "runs": combined,
            "combined_request_tok_s": median(combined_req),
            "request_runs": combined_req,
            "per_stream_tok_s": [median(s) for s in per_stream],
            "per_stream_runs": per_stream,
            "failed": sum(x.get("phase") == "concurrent" for x in failed_lines),
        }
        concurrent["server_combined_tok_s"] = median(
            [r for r in (server_combined_rate(g) for g in full) if r is not None]
        )
        concurrent["vs_server"] = _vs(concurrent["combined_tok_s"], concurrent["server_combined_tok_s"])
    early = [
        {
            "request_id": x["request_id"],
            "prompt": x.get("prompt"),
            "run": x.get("run"),
            "completion_tokens": x.get("completion_tokens"),
            "finish_reason": x.get("finish_reason"),
        }
        for x in ok
        if (x.get("completion_tokens") or 0) < plan.max_tokens
    ]
    # What is left failed is what counts (a resume retries the rest); the retried ones are said apart.
    failed = failed_lines
    retried = sum(1 for x in read if x.get("status") != "ok" and x.get("bench_key")) - len(failed)
    return {
        "kind": "bench",
        "max_tokens": plan.max_tokens,
        "runs_per_prompt": plan.runs,
        "ignore_eos": plan.ignore_eos,
        "length_mode": plan.length_mode,
        "length_state": plan.length_state,
        "length_forced": length_forced_flag(plan.length_state),
        **({"length_why": plan.length_why} if plan.length_mode == "prompt" and plan.length_why else {}),
        "rate": "tok_s = median over runs of (completion_tokens - 1) / (last token - first token); "
        "request_tok_s = completion_tokens / (done - sent); combined_tok_s = (sum of completion_tokens - 1)"
        " / (latest last token - earliest first token)",
        "prompts": prompts,
        "concurrent": concurrent,
        "stopped_early": early,
        "errors": len(failed),
        "retried_errors": retried,
        "measured_requests": len(ok) + len(failed),
        "error_samples": [
            {"request_id": x.get("request_id"), "status": x.get("status"), "error": x.get("error")} for x in failed[:5]
        ],
        **({"until_sure": _until_sure(read, plan, prompts, concurrent)} if plan.until_sure_margin is not None else {}),
    }


def _until_sure(
    lines: list[BenchLine],
    plan: BenchPlan,
    prompts: dict[str, BenchPromptJson],
    concurrent: BenchConcurrentJson | None,
) -> BenchUntilSureJson:
    """`--until-sure`: each prompt's (and the streams') interval beside its figures, and the run's decision."""
    checks = sure_rates(lines, plan)
    for name, p in prompts.items():
        p["until_sure"] = checks[name].to_json()
    if concurrent is not None:
        concurrent["until_sure"] = checks["concurrent"].to_json()
    names = [*prompts, *(["concurrent"] if concurrent is not None else [])]
    undecided = [n for n in names if not checks[n].sure]
    return {
        "margin": plan.until_sure_margin,
        "min_runs": plan.runs,
        "max_runs": plan.most_runs,
        "decided": not undecided,
        "undecided": undecided,
    }
