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


class StressSummary(_Open):
    """A finished stress run's counts and metrics (CONTRACT.md)."""

    kind: Literal["stress"]
    seed: int
    cycles: int = Field(ge=0)
    requests: int = Field(ge=0)
    errors: int = Field(ge=0)
    wrong_answers: int = Field(ge=0)
    metrics: dict[str, Any]


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
    """One line of `requests.jsonl`: one request as the client saw it (CONTRACT.md)."""

    request_id: str
    t_sent: float
    t_first_token: float | None = None
    t_done: float | None = None
    ttft_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    status: Literal[STATUSES]  # type: ignore[valid-type]  # as above
    error: str | None = None


class JudgeOpinion(_Open):
    """`graded.jsonl`'s `judge`: a judge model's verdict on a line the rules were unsure of (`--judge-url`)."""

    model: str
    verdict: Literal[JUDGE_VERDICTS]  # type: ignore[valid-type]  # as above
    words: str
    request_id: str | None = None


class GradedLine(_Open):
    """One line of `graded.jsonl`: one graded answer (CONTRACT.md); `judge` only where a judge was asked, never
    changing `correct` or `outcome`; `replay_line` only in a replay, the answer's line in its file."""

    id: str
    correct: bool
    outcome: Literal[OUTCOMES]  # type: ignore[valid-type]  # as above
    extracted: Any = None
    request_id: str | None = None
    replay_line: int | None = Field(default=None, ge=1)
    judge: JudgeOpinion | None = None


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
