"""Schemas of every file evalkit reads, as pydantic v2 models; `validate` turns a failure into one line.

User-written files (profiles in `evalkit.toml`, gate rules) forbid unknown keys: a misspelt key is an error, never
silently ignored. Run files (`manifest.json`, `summary.json`, `requests.jsonl`, `graded.jsonl`) type the fields
CONTRACT.md names and keep the rest open (`extra="allow"`): every command adds its own facts to them, and a reader
must still read runs written by other evalkit versions. `python -m evalkit.runs.schemas DIR` writes their JSON Schema
(docs/schemas/, kept current by tests/test_schemas.py).
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from evalkit.errors import UsageError

KINDS = ("bench", "capability", "stress", "load", "check")
STATUSES = ("ok", "error", "cancelled", "timeout")
OUTCOMES = ("correct", "wrong", "unparsed", "truncated", "error")
JUDGE_VERDICTS = ("correct", "wrong", "unsure", "error")
THINKING_STYLES = ("auto", "reasoning_effort", "chat_template_kwargs", "system_prompt", "none")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


def _finite(v: float | None, what: str = "value") -> float | None:
    if v is not None and not math.isfinite(v):
        raise ValueError(f"must be a finite number, not {v}")
    return v


# --- run files ---------------------------------------------------------------------------------------------------
class Manifest(_Open):
    """`manifest.json`: what ran, against which server, when; written first, stamped `finished` at the end."""

    schema_version: int | None = None  # absent in runs written before schema versions
    kind: Literal[KINDS]  # type: ignore[valid-type]  # Literal over a tuple constant: pydantic reads it, mypy cannot
    evalkit_version: str
    started: str
    finished: str | None = None
    command: list[str]
    incomplete: dict[str, Any] | None = None


class Score(_Open):
    """Correct out of total, per dataset or overall (`correct` is a mean over repeats with `--repeats`)."""

    correct: float = Field(ge=0)
    total: int = Field(ge=0)


class Summary(_Open):
    """`summary.json`, any kind: the kind, and whether the run ended incomplete (a write failed)."""

    schema_version: int | None = None
    kind: Literal[KINDS]  # type: ignore[valid-type]  # as above
    incomplete: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _by_kind(self) -> Summary:
        if self.incomplete is None and self.kind in _SUMMARY_BY_KIND:
            _SUMMARY_BY_KIND[self.kind].model_validate(self.model_dump())
        return self


class CapabilitySummary(_Open):
    """A finished capability run's scores (CONTRACT.md)."""

    kind: Literal["capability"]
    scores: dict[str, Score]
    total: Score


class LongPromptTokens(_Open):
    """A stress run's long prompt length: the target, as counted when fitted, as the server reported it."""

    target: int | None = None
    counted: dict[str, Any] = {}  # distributions (evalkit.stats.distribution)
    reported_by_server: dict[str, Any] = {}
    max_error_vs_target: float | None = None


class StressSummary(_Open):
    """A stress run's `summary.json`, the one record stress/summary.py writes and a reader validates: the contract's
    counts and metrics (required), then what every run of this version adds, in the order written (optional, so
    runs of earlier versions still read); the evidence and scenario sections follow as extra keys."""

    kind: Literal["stress"] = "stress"
    seed: int
    cycles: int = Field(ge=0)
    cycles_planned: int | None = None
    partial: bool | None = None
    stopped: str | None = None
    requests: int = Field(ge=0)
    errors: int = Field(ge=0)
    wrong_answers: int = Field(ge=0)
    divergent: int | None = None
    attempts: int | None = None
    cycle_attempts: dict[str, Any] | None = None
    unfinished_cycle: dict[str, Any] | None = None
    ignored_lines: dict[str, Any] | None = None
    metrics: dict[str, Any]
    diagnoses: dict[str, Any] | None = None
    not_exercised: dict[str, Any] | None = None
    failed_by_metric: dict[str, Any] | None = None
    error_kinds: dict[str, Any] | None = None
    error_requests: list[Any] | None = None
    wrong_answer_requests: list[Any] | None = None
    divergent_requests: list[Any] | None = None
    long_prompt_tokens: LongPromptTokens | None = None
    client: dict[str, Any] | None = None
    gpu_memory: dict[str, Any] | None = None
    gpu_memory_verdict: dict[str, Any] | None = None
    options: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The summary as summary.json holds it: `kind` first, then every field in order."""
        return self.model_dump()


class BenchPrompt(_Open):
    """One bench prompt's median rate and its runs."""

    tok_s: float | None = None
    runs: list[float]


class BenchSummary(_Open):
    """A finished bench run's rates (CONTRACT.md)."""

    kind: Literal["bench"]
    prompts: dict[str, BenchPrompt]
    concurrent: dict[str, Any] | None = None


_SUMMARY_BY_KIND: dict[str, type[BaseModel]] = {
    "capability": CapabilitySummary,
    "stress": StressSummary,
    "bench": BenchSummary,
}


class RequestLine(_Open):
    """One line of `requests.jsonl`: one request as the client saw it, the one record every command writes
    (`evalkit.runs.records.RequestRecord.to_json`, in this order) and a reader validates. The contract's fields
    (CONTRACT.md) are required or typed as it says; the rest are optional, so lines of earlier versions still read;
    the caller's labels (cycle, scenario, question id ...) and a command's own facts follow as extra keys."""

    request_id: str
    t_sent: float
    t_first_byte: float | None = None
    t_first_token: float | None = None
    t_first_answer_token: float | None = None
    t_done: float | None = None
    status: Literal[STATUSES]  # type: ignore[valid-type]  # as above
    error: str | None = None
    http_status: int | None = None
    content: str | None = None
    reasoning: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    usage_source: str | None = None
    chunk_times: list[float] | None = None  # only where a command keeps them (bench)
    reasoning_chunks: int | None = None
    content_chunks: int | None = None
    reasoning_tokens: int | None = None
    answer_tokens: int | None = None
    token_split_source: str | None = None
    connection_retries: int | None = None
    read_lag_s: float | None = None
    first_token_stamp_bound_s: float | None = None
    server_timings: dict[str, Any] | None = None
    ttft_s: float | None = None
    ttft_answer_s: float | None = None
    decode_tok_s: float | None = None
    request_tok_s: float | None = None
    t_last_token: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The line as requests.jsonl holds it: the fields given, in this order, then the extras."""
        return self.model_dump(exclude_unset=True, warnings=False)


class JudgeOpinion(_Open):
    """`graded.jsonl`'s `judge`: a judge model's verdict on a line the rules were unsure of (`--judge-url`)."""

    model: str
    verdict: Literal[JUDGE_VERDICTS]  # type: ignore[valid-type]  # as above
    words: str
    request_id: str | None = None


class GradedLine(_Open):
    """One line of `graded.jsonl`: one graded answer, the one record evals/grader.py writes (`graded_line`) and a
    reader validates. The contract's fields (CONTRACT.md: `id`, `correct`, `outcome`, `extracted`) come first with
    what the grade says (optional, so lines of earlier versions still read), then where the answer came from: a
    request (`request_id`) or, in a replay, its line in the file (`replay_line`); the caller's extras (finish
    reason, tokens, prompt, answer) follow. `judge` only where a judge was asked, never changing `correct` or
    `outcome`."""

    id: str
    dataset: str | None = None
    correct: bool
    outcome: Literal[OUTCOMES]  # type: ignore[valid-type]  # as above
    extracted: Any = None
    why: str | None = None
    rule: str | None = None
    ambiguous: bool | None = None
    readings: list[dict[str, Any]] | None = None  # only when two readings of the answer disagree
    details: dict[str, Any] | None = None
    dataset_revision: str | None = None
    row_hash: str | None = None
    request_id: str | None = None
    replay_line: int | None = Field(default=None, ge=1)
    judge: JudgeOpinion | None = None

    def to_json(self) -> dict[str, Any]:
        """The line as graded.jsonl holds it: the fields given, in order, then the extras."""
        return self.model_dump(exclude_unset=True)


class ReplayLine(_Open):
    """One line of a replay file: a recorded answer to grade (CONTRACT.md)."""

    id: str = Field(min_length=1)
    content: str
    reasoning: str | None = None
    finish_reason: str | None = None


# --- user files --------------------------------------------------------------------------------------------------
class ServerProfileTable(_Closed):
    """One `[servers.NAME]` table of `evalkit.toml`."""

    base_url: str | None = None
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    thinking: Literal[THINKING_STYLES] = "auto"  # type: ignore[valid-type]  # as above
    thinking_on_prompt: str = "/think"
    thinking_off_prompt: str = "/no_think"
    concurrency: int | None = Field(default=None, ge=1, le=4096)
    extra_body: dict[str, Any] = {}
    build: dict[str, Any] = {}
    log_patterns: dict[str, str] = {}

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, v: str) -> str:
        if not _ENV_NAME.match(v):
            raise ValueError("must be the name of an environment variable (letters, digits, _), not a key")
        return v

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"^https?://[^\s/]+", v):
            raise ValueError("must be an http:// or https:// URL")
        return v


class ConfigFile(_Closed):
    """`evalkit.toml`: named server profiles."""

    servers: dict[str, ServerProfileTable] = {}


class GateRule(_Closed):
    """One `[[rule]]` of a gate rules file: a metric, a comparison and exactly one way to set the limit."""

    metric: str = Field(pattern=r"^[a-z_]+\.[^.\s]+(\.[^.\s]+)*$")
    op: Literal["<", "<=", ">", ">=", "==", "!="]
    value: float | None = None
    relative: float | None = None
    offset: float | None = None
    name: str | None = None
    description: str | None = None

    model_config = ConfigDict(extra="forbid", strict=False)

    @field_validator("value", "relative", "offset", mode="before")
    @classmethod
    def _number(cls, v: Any) -> Any:
        if isinstance(v, bool) or (v is not None and not isinstance(v, (int, float))):
            raise ValueError("must be a number")
        return v

    @field_validator("value", "relative", "offset")
    @classmethod
    def _finite_limit(cls, v: float | None) -> float | None:
        return _finite(v)

    @field_validator("relative")
    @classmethod
    def _positive(cls, v: float | None) -> float | None:
        if v is not None and v <= 0:
            raise ValueError("must be above 0 (a fraction of the baseline, e.g. 0.97)")
        return v

    @model_validator(mode="after")
    def _one_limit(self) -> GateRule:
        given = [k for k in ("value", "relative", "offset") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of value, relative, offset")
        return self


class GateRules(_Closed):
    """A gate rules file: a non-empty list of `[[rule]]` tables."""

    rule: list[GateRule] = Field(min_length=1)


# --- validation ---------------------------------------------------------------------------------------------------
def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _shown(v: Any) -> str:
    text = json.dumps(v, default=str) if not isinstance(v, str) else repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def validate(model: type[BaseModel], data: Any, where: Path | str) -> BaseModel:
    """`data` checked against `model`; the first problem is a one-line UsageError naming the file, key and want."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        err = e.errors(include_url=False)[0]
        loc = _loc(tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-"))))
        msg = err["msg"]
        if err["type"] == "missing":
            raise UsageError(f"{where}: key {loc!r} is missing") from None
        if err["type"] == "extra_forbidden":
            raise UsageError(f"{where}: unknown key {loc!r}") from None
        got = f" (found {_shown(err['input'])})" if not isinstance(err.get("input", {}), dict) else ""
        at = f"key {loc!r}: " if loc else ""
        raise UsageError(f"{where}: {at}{msg.removeprefix('Value error, ')}{got}") from None


PUBLISHED: dict[str, type[BaseModel]] = {
    "manifest": Manifest,
    "summary": Summary,
    "capability-summary": CapabilitySummary,
    "stress-summary": StressSummary,
    "bench-summary": BenchSummary,
    "requests-line": RequestLine,
    "graded-line": GradedLine,
    "replay-line": ReplayLine,
    "evalkit-toml": ConfigFile,
    "gate-rules": GateRules,
}


def json_schemas() -> dict[str, str]:
    """File name -> JSON Schema text of every published model (what docs/schemas/ holds)."""
    return {
        f"{name}.schema.json": json.dumps(m.model_json_schema(), indent=2, sort_keys=True) + "\n"
        for name, m in PUBLISHED.items()
    }


def main(argv: list[str]) -> int:
    """Write the JSON Schemas into the directory given (default docs/schemas)."""
    out = Path(argv[0] if argv else "docs/schemas")
    out.mkdir(parents=True, exist_ok=True)
    for name, text in json_schemas().items():
        (out / name).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
