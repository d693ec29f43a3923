"""Schemas of the run files evalkit writes and reads, as pydantic v2 models; `validate` turns a failure into one line
for these and for the user-written files, whose models live with their owners (evalkit.config.config_file,
evalkit.gate.rules_file) and forbid unknown keys (`ClosedModel`): a misspelt key is an error, never silently ignored.

Run files (`manifest.json`, `summary.json`, `requests.jsonl`, `graded.jsonl`) type the fields
CONTRACT.md names and keep the rest open (`extra="allow"`): every command adds its own facts to them, and a reader
must still read runs written by other evalkit versions. `python -m evalkit.commands.publish_schemas DIR` writes their
JSON Schema with the user files' (docs/schemas/, kept current by tests/test_schemas.py).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError, model_validator

from evalkit.errors import UsageError
from evalkit.runs.evidence_parts import ServerLog, ServerMetrics, SpecDecode
from evalkit.runs.load_parts import Conversation, SharedPrefix
from evalkit.runs.summary_parts import (
    ClientTiming,
    Distribution,
    GpuCard,
    GpuMemoryVerdict,
    GpuTelemetry,
    NotExercised,
    NotExercisedJson,
    Number,
    Part,
    StoppedRequest,
)

KINDS = ("bench", "capability", "stress", "load", "check")
STATUSES = ("ok", "error", "cancelled", "timeout")
OUTCOMES = ("correct", "wrong", "unparsed", "truncated", "error")
JUDGE_VERDICTS = ("correct", "wrong", "unsure", "error")
_P = TypeVar("_P", bound=BaseModel)
_K = TypeVar("_K", bound="KindSummary")


class ClosedModel(BaseModel):
    """A user-written file's model: an unknown key is an error."""

    model_config = ConfigDict(extra="forbid", strict=True)


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


def finite(v: float | None, what: str = "value") -> float | None:
    """`v`, refused when it is not a finite number."""
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
    incomplete: dict[str, str] | None = None  # what failed: {"at", "error"} (evalkit.runs.rundir)


class PassAt1(Part):
    """pass@1 over repeats: its value, 95% interval, the questions and repeats, and how often repeats agree."""

    value: float
    ci95: list[float]
    questions: int
    repeats: int
    agreement: float


class Score(Part):
    """Correct out of total, per dataset or overall (`correct` is a mean over repeats with `--repeats`), the
    outcomes counted and the ambiguous grades among them."""

    correct: int | float = Field(ge=0)
    total: int = Field(ge=0)
    outcomes: dict[str, int | float] = {}
    ambiguous: int | None = None
    # issue #55: the score as an interval, [sure_correct, sure_correct + unsure] / total
    sure_correct: int | float | None = None
    unsure: int | float | None = None
    interval: list[float] | None = None
    pass_at_1: PassAt1 | None = None  # with --repeats


class Summary(_Open):
    """`summary.json`, any kind: the kind, and whether the run ended incomplete (a write failed)."""

    schema_version: int | None = None
    kind: Literal[KINDS]  # type: ignore[valid-type]  # as above
    incomplete: dict[str, str] | None = None

    @model_validator(mode="after")
    def _by_kind(self) -> Summary:
        if self.incomplete is None and self.kind in _SUMMARY_BY_KIND:
            _SUMMARY_BY_KIND[self.kind].model_validate(self.model_dump())
        return self


class KindSummary(Part):
    """What every kind's summary may hold beside its own figures, read as typed parts (`summary_parts`): the
    client's timing (`client`), the GPU memory cards (`gpu_memory`) and a stress run's leak verdict. The blocks
    stay as written (a writer's key order is the file's); these read them, a wrong type a one-line error."""

    def _part(self, key: str, model: type[_P]) -> _P | None:
        raw = getattr(self, key, None)
        if not raw:  # absent, null or empty: nothing recorded
            return None
        if isinstance(raw, model):  # a block declared as its part: empty is nothing recorded, as for a dict
            return raw if raw.model_dump(exclude_unset=True) else None
        return cast(_P, validate(model, raw, f"summary.json {key}"))

    def client_timing(self) -> ClientTiming | None:
        """`client`: how late the client read answers, its error budget, whether it distorted the run."""
        return self._part("client", ClientTiming)

    def gpu_cards(self) -> dict[str, GpuCard]:
        """`gpu_memory`: the cards by index as text (empty when the run sampled none)."""
        raw = getattr(self, "gpu_memory", None) or {}
        if not isinstance(raw, dict):
            raise UsageError(f"summary.json gpu_memory: expected an object of cards, found {_shown(raw)}")
        return {str(k): cast(GpuCard, validate(GpuCard, c, f"summary.json gpu_memory.{k}")) for k, c in raw.items()}

    def gpu_verdict(self) -> GpuMemoryVerdict | None:
        """`gpu_memory_verdict`: a stress run's leak verdict (None when not judged)."""
        return self._part("gpu_memory_verdict", GpuMemoryVerdict)

    def gpu_telemetry_part(self) -> GpuTelemetry | None:
        """`gpu_telemetry`: the cards' power and energy (None when the run recorded none)."""
        return self._part("gpu_telemetry", GpuTelemetry)

    def server_metrics_part(self) -> ServerMetrics | None:
        """`server_metrics`: /metrics over the run (None when the run scraped none)."""
        return self._part("server_metrics", ServerMetrics)

    def spec_decode_part(self) -> SpecDecode | None:
        """`spec_decode`: draft acceptance (None when the server drafted nothing the run could see)."""
        return self._part("spec_decode", SpecDecode)

    def server_log_part(self) -> ServerLog | None:
        """`server_log`: the server log's flagged lines (None without --server-log)."""
        return self._part("server_log", ServerLog)

    def options_block(self) -> dict[str, JsonValue]:
        """`options`: the flags that define the run, as written (empty when it has none)."""
        raw = getattr(self, "options", None)
        return raw if isinstance(raw, dict) else {}


class JudgeCounts(Part):
    """A capability summary's `judge` (evals/model_judge.judge_counts): lines sent to a judge model, its verdicts,
    and how often it disagrees with the rules."""

    sent: int
    verdicts: dict[str, int] = {}
    disagree: int | None = None
    judge_right_rules_not: int | None = None
    rules_right_judge_not: int | None = None
    models: list[str] = []


class Background(Part):
    requests: int = 0
    mean_in_flight: float | None = None


class _LoadSource(Part):
    source: str | None = None


class UnderLoadComparison(Part):
    """A capability summary's `under_load` (`--under-load`): the same questions idle and under load, McNemar's
    mark between them, the background's mean requests in flight and where the load came from."""

    idle: Score
    loaded: Score
    mcnemar: dict[str, str]
    lost: list[str] = []
    gained: list[str] = []
    changed_text_share: float | None = None
    worse_beyond_noise: bool = False
    background: Background | None = None
    load: _LoadSource | None = None


class CapabilitySummary(KindSummary):
    """A finished capability run's scores (CONTRACT.md)."""

    kind: Literal["capability"]
    scores: dict[str, Score]
    total: Score
    thinking: str | None = None
    judge: JudgeCounts | None = None
    under_load: UnderLoadComparison | None = None
    truncated_answers: int | None = None  # answers that hit max_tokens
    thinking_warning: str | None = None  # the thinking mode asked for did not take (evals.scoreboard)


class LongPromptTokens(Part):
    """A stress run's long prompt length: the target, as counted when fitted, as the server reported it."""

    target: int | None = None
    counted: dict[str, Number | None] = {}  # distributions (evalkit.stats.distribution)
    reported_by_server: dict[str, Number | None] = {}
    max_error_vs_target: float | None = None


class SureCheck(Part):
    """One check of `--until-sure` (evalkit_stress.until_sure.Check): a figure, comparison or verdict, its value and
    interval after the run's cycles, whether it is decided, and whether more cycles could decide it (`holds`)."""

    name: str
    what: str
    decided: bool
    value: Number | str | None = None
    n: int = 0
    why: str = ""
    interval: list[Number] | None = None
    holds: bool = True


class UntilSure(Part):
    """A stress summary's `until_sure`: the rule (`max_cycles`, `margin`, `min_cycles`, a `baseline` run), whether the
    run stopped early, and the decision after its last cycle."""

    max_cycles: int
    margin: Number
    min_cycles: int
    baseline: str | None = None
    stopped_early: bool = False
    cycles: int = 0
    decided: bool = False
    undecided: list[str] = []
    checks: list[SureCheck] = []


class StressSummary(KindSummary):
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
    cycle_attempts: dict[str, int] | None = None  # attempts by cycle number as text
    unfinished_cycle: dict[str, int] | None = None  # cycle, attempt, requests, errors, wrong_answers
    ignored_lines: dict[str, int] | None = None
    metrics: dict[str, dict[str, Number | None]]  # distributions (evalkit.stats.distribution) by metric
    diagnoses: dict[str, Any] | None = None
    not_exercised: dict[str, NotExercisedJson] | None = None
    failed_by_metric: dict[str, int] | None = None
    error_kinds: dict[str, int] | None = None
    error_requests: list[Any] | None = None
    wrong_answer_requests: list[Any] | None = None
    divergent_requests: list[Any] | None = None
    long_prompt_tokens: LongPromptTokens | None = None
    client: dict[str, Any] | None = None
    gpu_memory: dict[str, GpuCard] | None = None
    gpu_memory_verdict: dict[str, Any] | None = None
    options: dict[str, Any] | None = None
    until_sure: UntilSure | None = None

    def to_json(self) -> dict[str, Any]:
        """The summary as summary.json holds it: `kind` first, then the fields in the order given."""
        return {"kind": self.kind, **super().to_json()}

    def diagnosis(self, key: str) -> Any:
        """One verdict's record as written in `diagnoses` (read by evalkit_stress.verdicts.VerdictReading)."""
        return (self.diagnoses or {}).get(key)

    def effective_concurrency_raw(self) -> float | None:
        """How many streams the server served at once, unrounded (`diagnoses.effective_concurrency_raw`)."""
        v = self.diagnosis("effective_concurrency_raw")
        return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    def metric(self, key: str) -> Distribution | None:
        """One metric's distribution (None when the run has no such metric)."""
        raw = self.metrics.get(key)
        return cast(Distribution, validate(Distribution, raw, f"summary.json metrics.{key}")) if raw else None

    def not_exercised_for(self, key: str) -> NotExercised | None:
        """The requests of a metric whose planned situation did not happen (None when all happened)."""
        raw = (self.not_exercised or {}).get(key)
        return cast(NotExercised, validate(NotExercised, raw, f"summary.json not_exercised.{key}")) if raw else None


class BenchRateSure(Part):
    """`bench --until-sure`: how sure one median rate is (evalkit.bench.until_sure.RateCheck): its 95%
    distribution-free interval (none before 6 runs) and the runs it rests on."""

    sure: bool
    interval: list[float] | None = None
    n: int


class BenchUntilSure(Part):
    """A bench summary's `until_sure`: the rule (`margin` of the median, `min_runs`, `max_runs`) and whether every
    prompt (and the streams) was sure."""

    margin: float
    min_runs: int
    max_runs: int
    decided: bool
    undecided: list[str] = []


class BenchPrompt(Part):
    """One bench prompt's median rates and their runs (evalkit.bench.throughput.summarize, then the server's own
    rate where it sent no `timings`)."""

    tok_s: float | None = None
    runs: list[float]
    ttft_s: float | None = None
    request_tok_s: float | None = None
    request_runs: list[float] = []
    completion_tokens: list[int | None] = []
    failed: int | None = None
    server_tok_s: float | None = None
    vs_server: float | None = None
    # medians, where the server reasoned: the first answer token, and the token split
    ttft_answer_s: float | None = None
    reasoning_tokens: float | None = None
    answer_tokens: float | None = None
    until_sure: BenchRateSure | None = None  # with --until-sure


class BenchConcurrent(Part):
    """A bench run's streams at once (`--concurrency N`): combined and per-stream rates and their runs."""

    prompt: str | None = None
    streams: int | None = None
    combined_tok_s: float | None = None
    runs: list[float] = []
    combined_request_tok_s: float | None = None
    request_runs: list[float] = []
    per_stream_tok_s: list[float | None] = []
    per_stream_runs: list[list[float]] = []
    failed: int | None = None
    server_combined_tok_s: float | None = None
    vs_server: float | None = None
    until_sure: BenchRateSure | None = None  # with --until-sure


class BenchSummary(KindSummary):
    """A finished bench run's rates (CONTRACT.md)."""

    kind: Literal["bench"]
    prompts: dict[str, BenchPrompt]
    concurrent: BenchConcurrent | None = None
    # field_support.length_state: forced (length_forced true), sent_not_observable (ignore_eos sent, its effect could
    # not be observed with this model: null), not_forced (false)
    length_state: str | None = None
    length_forced: bool | None = None
    length_why: str | None = None
    stopped_early: list[StoppedRequest] = []
    until_sure: BenchUntilSure | None = None  # with --until-sure
    errors: int = 0  # measured requests left failed
    error_samples: list[dict[str, str | None]] = []  # the first failed requests as written: request_id, status, error


class _IncompleteSummary(KindSummary):
    kind: str


class LoadSummary(KindSummary):
    """A load run's summary: its kind, and a conversation or shared-prefix run's own block; the points and the
    capacity figures (evalkit.load.summary) are read by the report's capacity section."""

    kind: Literal["load"]
    conversation: Conversation | None = None
    shared_prefix: SharedPrefix | None = None


class CheckSummary(KindSummary):
    """A check run's summary (evalkit.check): what the server was found to take and say."""

    kind: Literal["check"]


_SUMMARY_BY_KIND: dict[str, type[KindSummary]] = {
    "capability": CapabilitySummary,
    "stress": StressSummary,
    "bench": BenchSummary,
}
_SUMMARY_BY_KIND_ALL: dict[str, type[KindSummary]] = {**_SUMMARY_BY_KIND, "load": LoadSummary, "check": CheckSummary}


def written_record(data: dict[str, Any]) -> KindSummary:
    """The record a measurement writes as its summary.json: its kind's model, validated as a reader will validate
    it (a writer's wrong type fails here, at the end of the run, not in a later report); `to_json()` gives back the
    keys in the order given."""
    return _SUMMARY_BY_KIND_ALL[data["kind"]].model_validate(data)


def as_kind(record: KindSummary, model: type[_K]) -> _K:
    """`record` as its kind's model (a command's table of its own run); another kind is a one-line UsageError."""
    if not isinstance(record, model):
        raise UsageError(f"summary.json: a {record.kind} summary, not a {model.__name__}")  # type: ignore[attr-defined]
    return record


def summary_record(data: dict[str, Any], where: Path | str) -> KindSummary:
    """A summary.json's record as its kind's model; an incomplete run's that lacks its kind's figures as the shared
    parts alone. A malformed one is a one-line UsageError naming `where`."""
    validate(Summary, data, where)
    model = _SUMMARY_BY_KIND_ALL[data["kind"]]
    if data.get("incomplete") is not None:
        try:
            return model.model_validate(data)
        except ValidationError:
            model = _IncompleteSummary
    return cast(KindSummary, validate(model, data, where))


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
    server_timings: dict[str, JsonValue] | None = None  # the server's own figures, as it sent them
    ttft_s: float | None = None
    ttft_answer_s: float | None = None
    decode_tok_s: float | None = None
    request_tok_s: float | None = None
    t_last_token: float | None = None

    def to_json(self) -> dict[str, JsonValue]:
        """The line as requests.jsonl holds it: the fields given, in this order, then the extras."""
        return self.model_dump(exclude_unset=True, warnings=False)


class TaggedRequestLine(RequestLine):
    """A requests.jsonl line with the labels the commands put on it, as a reader reads them: stress's cycle,
    attempt, scenario, role and metric, load's phase, load and outcome (stress has an outcome too). The writer
    writes a RequestLine and its labels as extra keys; this names the ones readers use."""

    cycle: int | None = None
    attempt: int | None = None
    scenario: str | None = None
    role: str | None = None
    metric: str | None = None
    phase: str | None = None
    load: int | float | None = None
    outcome: str | None = None


class JudgeOpinion(_Open):
    """`graded.jsonl`'s `judge`: a judge model's verdict on a line the rules were unsure of (`--judge-url`)."""

    model: str
    verdict: Literal[JUDGE_VERDICTS]  # type: ignore[valid-type]  # as above
    words: str
    request_id: str | None = None
    settles: bool | None = None  # issue #55: its verdict settles an unsure grade (the sure score counts it)


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
    sure: bool | None = None  # issue #55: the strongest readings agree and nothing after contradicts them
    readings: list[dict[str, JsonValue]] | None = None  # every reader's reading (rule, value, strength, correct)
    details: dict[str, JsonValue] | None = None  # what the dataset's grader adds (humanevalplus: base, plus)
    dataset_revision: str | None = None
    row_hash: str | None = None
    request_id: str | None = None
    replay_line: int | None = Field(default=None, ge=1)
    judge: JudgeOpinion | None = None
    # what the capability command adds (evals/runner.py), in the order it passes them
    repeat: int | None = None  # with --repeats
    finish_reason: str | None = None
    thinking: bool | None = None  # the answer came with reasoning
    reasoning_tokens: int | None = None
    answer_tokens: int | None = None
    token_count_source: str | None = None
    prompt: str | None = None
    content: str | None = None
    reasoning: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The line as graded.jsonl holds it: the fields given, in order, then the extras."""
        return self.model_dump(exclude_unset=True)


class ReplayLine(_Open):
    """One line of a replay file: a recorded answer to grade (CONTRACT.md)."""

    id: str = Field(min_length=1)
    content: str
    reasoning: str | None = None
    finish_reason: str | None = None


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


# The run files' models, by the name of their JSON Schema in docs/schemas/ (evalkit.commands.publish_schemas adds the
# user files' models from their owners: evalkit.config.config_file, evalkit.gate.rules_file).
RUN_FILES: dict[str, type[BaseModel]] = {
    "manifest": Manifest,
    "summary": Summary,
    "capability-summary": CapabilitySummary,
    "stress-summary": StressSummary,
    "bench-summary": BenchSummary,
    "requests-line": RequestLine,
    "graded-line": GradedLine,
    "replay-line": ReplayLine,
}
