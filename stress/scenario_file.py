"""Stress scenario files (TOML): loading and validating them before anything is sent (docs/stress-scenarios.md).

Every problem is a `ScenarioFileError` (exit 2) naming the file, the scenario and the key, on one line. The
built-in file `prompts/stress/default-cycle.toml` is the write-up's cycle that `evalkit stress` runs by default.
"""

from __future__ import annotations

import hashlib
import math
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any, NoReturn, TypedDict

from evalkit.errors import UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same module under its backport name
    import tomli as tomllib

BUILTIN_NAME = "default-cycle.toml"
EVENTS = ("sent", "first_token", "done")
PROMPTS = ("long", "short", "count", "text")
RUN_MODES = ("sequential", "concurrent")
DIST_METRICS = ("ttft_s", "latency_s", "decode_tok_s", "prompt_tokens")
COUNT_METRICS = ("requests", "errors", "wrong_answers", "cancelled")
STATS = ("p50", "p95", "max", "min", "n")
OPS = ("<=", ">=", "==", "!=", "<", ">")

_TOP_KEYS = ("description", "cycles", "run", "context_tokens", "scenario")
_SCENARIO_KEYS = ("name", "description", "rounds", "report", "expect", "request")
_REQUEST_KEYS = (
    "id",
    "role",
    "prompt",
    "tokens",
    "max_tokens",
    "send",
    "cancel",
    "repeat",
    "text",
    "answer",
    "same_as",
)
_TIME_KEYS = ("after", "on", "offset")
# Bounds checked before a schedule is expanded (a dry run included), so a typo cannot ask for a billion requests.
MAX_CYCLES = 10_000
MAX_REPEAT = 1_000
MAX_ROUNDS = 1_000
MAX_REQUESTS_PER_CYCLE = 10_000
MAX_TOKENS_PER_REQUEST = 10_000_000
MAX_TOKENS_PER_CYCLE = 100_000_000
MAX_OFFSET_S = 86_400.0
_ID_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_EXPECT_RE = re.compile(r"^\s*([A-Za-z0-9_.]+)\s*(<=|>=|==|!=|<|>)\s*(-?[0-9][0-9_.eE+-]*)\s*$")


class ScenarioFileError(UsageError):
    """A scenario file that cannot be run: the message names the file, the scenario and the key."""


@dataclass(frozen=True)
class Span:
    """A fixed value (lo == hi) or a seeded range drawn once per use."""

    lo: float
    hi: float

    @property
    def fixed(self) -> bool:
        """True when no draw is needed."""
        return self.lo == self.hi


@dataclass(frozen=True)
class TimeRef:
    """A time relative to the scenario's start (no `after`) or to the latest `on` event of the named requests."""

    after: tuple[str, ...]
    on: str
    offset: Span


@dataclass(frozen=True)
class RequestSpec:
    """One request of a scenario as written in the file (before seeds, repeats and rounds are applied)."""

    id: str
    role: str
    prompt: str
    tokens: Span | None
    max_tokens: int | None
    send: TimeRef
    cancel: TimeRef | None
    repeat: int
    text: str | None
    answer: str | None
    same_as: str | None


@dataclass(frozen=True)
class MetricRef:
    """`[role.]metric[.stat]`: a scenario metric over all its requests or over one role's."""

    role: str | None
    metric: str
    stat: str | None

    @property
    def key(self) -> str:
        """The metric's name in summary.json's `scenarios.<name>.metrics`."""
        return f"{self.role}.{self.metric}" if self.role else self.metric


@dataclass(frozen=True)
class Expectation:
    """`ttft_s.p95 <= 2.0`: a pass/fail line of the run."""

    text: str
    ref: MetricRef
    op: str
    value: float


@dataclass(frozen=True)
class ScenarioSpec:
    """A named scenario: its requests, how many rounds a cycle runs it, what to report and expect."""

    name: str
    requests: tuple[RequestSpec, ...]
    rounds: int
    report: tuple[MetricRef, ...]
    expect: tuple[Expectation, ...]


@dataclass(frozen=True)
class ScenarioFile:
    """A validated scenario file; `sha256` of its text fixes it for resuming, `builtin` marks the default."""

    label: str
    text: str
    sha256: str
    builtin: bool
    cycles: int | None
    run: str
    context_tokens: int | None
    scenarios: tuple[ScenarioSpec, ...]

    @property
    def names(self) -> tuple[str, ...]:
        """Scenario names in file order."""
        return tuple(s.name for s in self.scenarios)

    @property
    def requests_per_cycle(self) -> int:
        """Requests one cycle sends: every request's repeats times its scenario's rounds."""
        return sum(sc.rounds * sum(r.repeat for r in sc.requests) for sc in self.scenarios)


def builtin_scenarios() -> ScenarioFile:
    """The write-up's cycle, `prompts/stress/default-cycle.toml`."""
    text = files("evalkit_prompts").joinpath(f"stress/{BUILTIN_NAME}").read_text(encoding="utf-8")
    return parse_scenarios(text, BUILTIN_NAME, builtin=True)


def load_scenarios(path: str | Path) -> ScenarioFile:
    """Read and validate a scenario file (exit 2 on any problem)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ScenarioFileError(f"{p}: cannot read the scenario file ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise ScenarioFileError(f"{p}: not UTF-8 text (byte {e.start})") from None
    return parse_scenarios(text, str(p))


def parse_scenarios(text: str, label: str, builtin: bool = False) -> ScenarioFile:
    """Validate scenario-file text; `label` names it in errors."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ScenarioFileError(f"{label}: not valid TOML ({e})") from None
    where = _Where(label)
    _keys(data, _TOP_KEYS, where)
    cycles = _int(data, "cycles", where, minimum=1, maximum=MAX_CYCLES)
    run = data.get("run", "sequential")
    if run not in RUN_MODES:
        where.fail("run", f"must be one of {', '.join(RUN_MODES)}, not {run!r}")
    context = _int(data, "context_tokens", where, minimum=1)
    raw = data.get("scenario")
    if not isinstance(raw, list) or not raw:
        where.fail("scenario", "the file needs at least one [[scenario]] table")
    scenarios: list[ScenarioSpec] = []
    for i, sc in enumerate(raw):
        if not isinstance(sc, dict):
            where.fail(f"scenario[{i}]", "must be a table")
        spec = _scenario(sc, where.scenario(sc.get("name"), i), context)
        if spec.name in {s.name for s in scenarios}:
            where.scenario(spec.name, i).fail("name", "another scenario has this name")
        scenarios.append(spec)
    out = ScenarioFile(
        label, text, hashlib.sha256(text.encode("utf-8")).hexdigest(), builtin, cycles, run, context, tuple(scenarios)
    )
    _check_cycle_bounds(out, where)
    return out


def _check_cycle_bounds(f: ScenarioFile, where: _Where) -> None:
    n = f.requests_per_cycle
    if n > MAX_REQUESTS_PER_CYCLE:
        where.fail(
            "scenario",
            f"one cycle would send {n} requests, above the limit of {MAX_REQUESTS_PER_CYCLE} "
            "(rounds x repeat over every request)",
        )
    tokens = sum(
        sc.rounds * r.repeat * ((r.tokens.hi if r.tokens else 0) + (r.max_tokens or 0))
        for sc in f.scenarios
        for r in sc.requests
    )
    if tokens > MAX_TOKENS_PER_CYCLE:
        where.fail(
            "scenario",
            f"one cycle would send {tokens:.0f} prompt and completion tokens, above the limit "
            f"of {MAX_TOKENS_PER_CYCLE}",
        )


class _Where:
    """Builds the one-line error message: file, scenario, key."""

    def __init__(self, label: str, scenario: str | None = None) -> None:
        self.label = label
        self.name = scenario

    def scenario(self, name: Any, index: int) -> _Where:
        return _Where(self.label, name if isinstance(name, str) and name else f"#{index + 1}")

    def fail(self, key: str, why: str) -> NoReturn:
        at = f"scenario {self.name!r}: " if self.name else ""
        raise ScenarioFileError(f"{self.label}: {at}key {key!r}: {why}")


def _keys(d: Iterable[str], allowed: tuple[str, ...], where: _Where, prefix: str = "") -> None:
    for k in d:
        if k not in allowed:
            where.fail(prefix + k, f"unknown key (allowed: {', '.join(allowed)})")


def _int(
    d: dict[str, Any], key: str, where: _Where, minimum: int, prefix: str = "", maximum: int | None = None
) -> int | None:
    v = d.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        where.fail(prefix + key, f"must be an integer of at least {minimum}, not {v!r}")
    if maximum is not None and v > maximum:
        where.fail(prefix + key, f"is {v}, above the limit of {maximum}")
    return int(v)


def _span(v: Any, key: str, where: _Where, integer: bool = False) -> Span:
    kind = "an integer" if integer else "a number"
    ok: Callable[[Any], bool] = (
        (lambda x: isinstance(x, int) and not isinstance(x, bool))
        if integer
        else (lambda x: isinstance(x, (int, float)) and not isinstance(x, bool))
    )
    if ok(v):
        lo = hi = v
    elif isinstance(v, list) and len(v) == 2 and all(ok(x) for x in v):
        lo, hi = v
    else:
        where.fail(key, f"must be {kind} or a [low, high] range, not {v!r}")
    if any(isinstance(x, float) and not math.isfinite(x) for x in (lo, hi)):
        where.fail(key, f"must be finite, not {v!r}")
    if lo < 0 or hi < lo:
        where.fail(key, f"needs 0 <= low <= high, not {v!r}")
    limit = MAX_TOKENS_PER_REQUEST if integer else MAX_OFFSET_S
    if hi > limit:
        where.fail(key, f"{hi:g} is above the limit of {limit:g}")
    return Span(float(lo), float(hi))


def _time(v: Any, key: str, where: _Where) -> TimeRef:
    if not isinstance(v, dict):
        where.fail(key, 'must be a table like { after = "long", on = "first_token", offset = 0.5 }')
    _keys(v, _TIME_KEYS, where, prefix=f"{key}.")
    after = v.get("after", ())
    if isinstance(after, str):
        after = (after,)
    if not isinstance(after, (list, tuple)) or not all(isinstance(a, str) for a in after):
        where.fail(f"{key}.after", "must be a request id or a list of them")
    on = v.get("on", "done" if key.endswith("send") else "sent")
    if on not in EVENTS:
        where.fail(f"{key}.on", f"must be one of {', '.join(EVENTS)}, not {on!r}")
    return TimeRef(tuple(after), on, _span(v.get("offset", 0.0), f"{key}.offset", where))


class _Request(TypedDict):
    """One request as read from the file, before `same_as` fills in its role and prompt (then a RequestSpec)."""

    id: str
    role: str | None
    prompt: str | None
    tokens: Span | None
    max_tokens: int | None
    send: TimeRef
    cancel: TimeRef | None
    repeat: int
    text: str | None
    answer: str | None
    same_as: str | None


def _spec(r: _Request) -> RequestSpec:
    """The request once `_resolve_same_as` has set its role and its prompt (a request has both by then)."""
    role, prompt = r["role"], r["prompt"]
    if role is None or prompt is None:
        raise AssertionError(f"request {r['id']!r} unresolved")
    return RequestSpec(
        r["id"],
        role,
        prompt,
        r["tokens"],
        r["max_tokens"],
        r["send"],
        r["cancel"],
        r["repeat"],
        r["text"],
        r["answer"],
        r["same_as"],
    )


def _request(r: Any, i: int, where: _Where, context: int | None) -> _Request:
    if not isinstance(r, dict):
        where.fail(f"request[{i}]", "must be a table")
    rid = r.get("id")
    if not isinstance(rid, str) or not _ID_RE.match(rid):
        where.fail(f"request[{i}].id", f"must be a name of letters, digits and _ starting with a letter, not {rid!r}")
    p = f"request.{rid}."
    _keys(r, _REQUEST_KEYS, where, prefix=p)
    prompt = r.get("prompt")
    if prompt is not None and prompt not in PROMPTS:
        where.fail(p + "prompt", f"must be one of {', '.join(PROMPTS)}, not {prompt!r}")
    if prompt is None and r.get("same_as") is None:
        where.fail(p + "prompt", "is required (or same_as another request)")
    for k in ("role", "text", "answer", "same_as"):
        if k in r and not isinstance(r[k], str):
            where.fail(p + k, f"must be a string, not {r[k]!r}")
    if prompt == "text" and not r.get("text"):
        where.fail(p + "text", 'prompt = "text" needs the text to send')
    if prompt not in (None, "text") and ("text" in r or "answer" in r):
        where.fail(p + ("text" if "text" in r else "answer"), 'only a prompt = "text" request takes its own text')
    tokens = None
    if "tokens" in r:
        if prompt not in ("long", None):
            where.fail(p + "tokens", 'only a prompt = "long" request has a length to fit')
        tokens = _span(r["tokens"], p + "tokens", where, integer=True)
        if tokens.lo < 100:
            where.fail(p + "tokens", "a long prompt needs at least 100 tokens")
    max_tokens = _int(r, "max_tokens", where, minimum=1, prefix=p, maximum=MAX_TOKENS_PER_REQUEST)
    if prompt == "count" and max_tokens is not None and max_tokens < 16:
        where.fail(p + "max_tokens", "a count prompt needs at least 16 tokens to count in")
    if context is not None and tokens is not None and tokens.hi + (max_tokens or 0) > context:
        where.fail(
            p + "tokens",
            f"{int(tokens.hi)} prompt tokens + {max_tokens or 0} max_tokens do not fit the "
            f"server's context of {context} tokens (context_tokens)",
        )
    return {
        "id": rid,
        "role": r.get("role"),
        "prompt": prompt,
        "tokens": tokens,
        "max_tokens": max_tokens,
        "send": _time(r.get("send", {}), p + "send", where),
        "cancel": _time(r["cancel"], p + "cancel", where) if "cancel" in r else None,
        "repeat": _int(r, "repeat", where, minimum=1, prefix=p, maximum=MAX_REPEAT) or 1,
        "text": r.get("text"),
        "answer": r.get("answer"),
        "same_as": r.get("same_as"),
    }


def _scenario(sc: dict[str, Any], where: _Where, context: int | None) -> ScenarioSpec:
    _keys(sc, _SCENARIO_KEYS, where)
    name = sc.get("name")
    if not isinstance(name, str) or not _ID_RE.match(name):
        where.fail("name", f"must be a name of letters, digits and _ starting with a letter, not {name!r}")
    raw = sc.get("request")
    if not isinstance(raw, list) or not raw:
        where.fail("request", "a scenario needs at least one [[scenario.request]]")
    reqs = [_request(r, i, where, context) for i, r in enumerate(raw)]
    by_id: dict[str, _Request] = {}
    for r in reqs:
        if r["id"] in by_id:
            where.fail(f"request.{r['id']}.id", "another request of this scenario has this id")
        by_id[r["id"]] = r
    for r in reqs:
        _resolve_same_as(r, by_id, where)
    for r in reqs:
        for key, ref in (("send", r["send"]), ("cancel", r["cancel"])):
            for a in ref.after if ref else ():
                if a not in by_id:
                    where.fail(f"request.{r['id']}.{key}.after", f"no request {a!r} in this scenario")
        c = r["cancel"]
        if c and (not c.after or r["id"] in c.after) and c.on == "done":
            where.fail(f"request.{r['id']}.cancel.on", "a request cannot be cancelled after it is done")
        if r["id"] in r["send"].after:
            where.fail(f"request.{r['id']}.send.after", "a request cannot be sent after its own event")
    _no_cycles(reqs, where)
    specs = tuple(_spec(r) for r in reqs)
    roles = {s.role for s in specs}
    for r in reqs:
        if r["role"] in DIST_METRICS + COUNT_METRICS:
            where.fail(f"request.{r['id']}.role", "a role cannot be named like a metric")
    report = tuple(_metric(m, "report", where, specs, roles, stat_allowed=False) for m in _strings(sc, "report", where))
    expect = tuple(_expectation(e, where, specs, roles) for e in _strings(sc, "expect", where))
    return ScenarioSpec(name, specs, _int(sc, "rounds", where, minimum=1, maximum=MAX_ROUNDS) or 1, report, expect)


def _resolve_same_as(r: _Request, by_id: dict[str, _Request], where: _Where) -> None:
    src = r["same_as"]
    if src is None:
        r["role"] = r["role"] or r["id"]
        return
    t = by_id.get(src)
    if t is None:
        where.fail(f"request.{r['id']}.same_as", f"no request {src!r} in this scenario")
    if t["same_as"] is not None:
        where.fail(f"request.{r['id']}.same_as", f"{src!r} is itself a copy; name the original")
    if r["prompt"] not in (None, t["prompt"]):
        where.fail(f"request.{r['id']}.prompt", f"differs from the prompt of {src!r}, which it copies")
    r["prompt"] = t["prompt"]
    r["role"] = r["role"] or r["id"]
    if t["prompt"] == "long":
        r["tokens"] = r["tokens"] or t["tokens"]


def _no_cycles(reqs: list[_Request], where: _Where) -> None:
    # A request waits for the requests its send names, and a cancel waits for its own request's send.
    deps = {r["id"]: set(r["send"].after) for r in reqs}
    state: dict[str, int] = {}

    def visit(n: str, path: list[str]) -> None:
        if state.get(n) == 2:
            return
        if state.get(n) == 1:
            loop = path[path.index(n) :] + [n]
            where.fail(f"request.{n}.send.after", "references form a cycle: " + " -> ".join(loop))
        state[n] = 1
        for d in sorted(deps[n]):
            visit(d, path + [n])
        state[n] = 2

    for r in reqs:
        visit(r["id"], [])


def _strings(sc: dict[str, Any], key: str, where: _Where) -> list[str]:
    v = sc.get(key, [])
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        where.fail(key, "must be a list of strings")
    return v


def _metric(
    text: str, key: str, where: _Where, reqs: tuple[RequestSpec, ...], roles: set[str], stat_allowed: bool
) -> MetricRef:
    parts = text.strip().split(".")
    role = parts.pop(0) if parts and parts[0] in roles and len(parts) > 1 else None
    if not parts or parts[0] not in DIST_METRICS + COUNT_METRICS:
        where.fail(
            key,
            f"{text!r}: unknown metric (known: {', '.join(DIST_METRICS + COUNT_METRICS)}, "
            f"optionally after a role: {', '.join(sorted(roles))})",
        )
    metric = parts.pop(0)
    stat = parts.pop(0) if parts else None
    if parts or (stat is not None and (not stat_allowed or metric in COUNT_METRICS or stat not in STATS)):
        where.fail(
            key,
            f"{text!r}: {metric} takes "
            + (f"one of {', '.join(STATS)}" if metric in DIST_METRICS and stat_allowed else "no statistic here"),
        )
    if stat_allowed and metric in DIST_METRICS and stat is None:
        where.fail(key, f"{text!r}: name a statistic ({', '.join(STATS)}), e.g. {metric}.p95")
    chosen = [r for r in reqs if role is None or r.role == role]
    why = _cannot_produce(metric, chosen)
    if why:
        where.fail(key, f"{text!r}: the scenario cannot produce it ({why})")
    return MetricRef(role, metric, stat)


def _cannot_produce(metric: str, reqs: list[RequestSpec]) -> str | None:
    if metric in ("ttft_s", "latency_s", "decode_tok_s") and all(r.cancel is not None for r in reqs):
        return "every request it covers is cancelled on purpose, so none finishes"
    if metric == "decode_tok_s" and all(r.max_tokens == 1 for r in reqs):
        return "with max_tokens = 1 there is no decode to time"
    if metric == "cancelled" and all(r.cancel is None for r in reqs):
        return "no request it covers has a cancel"
    return None


def _expectation(text: str, where: _Where, reqs: tuple[RequestSpec, ...], roles: set[str]) -> Expectation:
    m = _EXPECT_RE.match(text)
    if not m:
        where.fail(
            "expect", f'{text!r}: write it as METRIC OP NUMBER, e.g. "ttft_s.p95 <= 2.0" (OP one of {" ".join(OPS)})'
        )
    try:
        value = float(m.group(3))
    except ValueError:
        where.fail("expect", f"{text!r}: {m.group(3)!r} is not a number")
    return Expectation(
        text.strip(), _metric(m.group(1), "expect", where, reqs, roles, stat_allowed=True), m.group(2), value
    )
