"""The JSON shapes of a stress run's diagnoses (summary.json's `diagnoses`), as stress/verdicts.py's `to_json` writes
them: a key a record leaves out where it has no value is `NotRequired`; where it is written as null, it is
`... | None`. A TypedDict is a plain dict at run time, so the file is the same, key order included.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

from evalkit.evidence.ttft_split import TtftSplitJson
from evalkit.evidence.wait_parts import SilentGapJson

# A figure a verdict rests on: seconds, tokens, a ratio, a log line, or a wait split into parts (seconds by part).
Figure = float | int | str | None | dict[str, float]
Figures = dict[str, Figure]


class NextDelayJson(TypedDict):
    """What held the request sent after a cancel: `ttft_s` alone where nothing split its wait, else its parts."""

    evidence: str
    ttft_s: NotRequired[float | None]
    wait_s: NotRequired[float | None]
    parts_s: NotRequired[dict[str, float]]
    cause: str
    prefill_s: NotRequired[float | None]
    would_tell: NotRequired[str | None]


class CancelSampleJson(TypedDict):
    """One cancelled long request (`cancel_aborts.samples`)."""

    verdict: str
    evidence: str
    granularity: NotRequired[str]
    figures: Figures
    why: NotRequired[str]
    would_tell: NotRequired[str]
    next_delay: NotRequired[NextDelayJson | None]
    cycle: int | None
    request_id: str | None


class CancelVerdictJson(TypedDict):
    """`cancel_aborts`: did the engine stop working on a cancelled long request, over the run's cycles."""

    verdict: str
    aborts: bool | None
    evidence: str
    granularity: NotRequired[str | None]
    stop_after_cancel_s_max: NotRequired[float | None]
    judged_cycles: int
    not_exercised_cycles: NotRequired[int]
    samples: list[CancelSampleJson]
    next_delay_cause: NotRequired[str | None]
    why: NotRequired[str | None]
    would_tell: NotRequired[str | None]


class StepsFigures(TypedDict):
    """vLLM's step log behind a head-of-line sample: the token counts that settled it, and the record."""

    long_prompt_tokens: int
    short_prompt_tokens: int
    long_chunks_before_tokens: list[int]
    short_step_tokens: int | None
    settled_by: str


class HeadOfLineFiguresJson(TypedDict):
    """An inserted short request against the long prefill it landed in."""

    ttft_s: float
    long_prefill_left_s: float
    wait_before_start_s: NotRequired[float]
    in_launched_slot_s: NotRequired[float]
    wait_parts_s: NotRequired[dict[str, float]]
    steps: NotRequired[StepsFigures]


class HeadOfLineSampleJson(TypedDict):
    """One inserted short request (`head_of_line_blocking.samples`)."""

    verdict: str
    evidence: str
    cause: str | None
    figures: HeadOfLineFiguresJson
    request_id: str


class HeadOfLineVerdictJson(TypedDict):
    """`head_of_line_blocking`: did inserted short requests wait for another request's prefill."""

    verdict: str
    detected: bool | None
    evidence: str
    cause: NotRequired[str | None]
    blocked: NotRequired[int]
    judged: NotRequired[int]
    wait_fraction_p50: NotRequired[float | None]
    samples: list[HeadOfLineSampleJson]
    why: NotRequired[str]
    would_tell: NotRequired[str]


class LongHurtVerdictJson(TypedDict):
    """`long_hurt_by_inserts`: is the long request's own prefill slower with inserted shorts than alone."""

    verdict: str
    detected: bool | None
    evidence: str
    ratio_p50: float | None
    figures: dict[str, float | None]
    why: NotRequired[str]
    would_tell: NotRequired[str]


class ConcurrencyFiguresJson(TypedDict):
    """Each stream alone and together (p50s of the run's metrics)."""

    gen_alone_tok_s: float | None
    concurrent_stream_tok_s: float | None
    concurrent_combined_tok_s: float | None
    effective_concurrency: float | None
    concurrency_speedup: float | None


class ConcurrencyVerdictJson(TypedDict):
    """`concurrency`: were two generations served together."""

    verdict: str
    evidence: str
    figures: ConcurrencyFiguresJson
    would_tell: NotRequired[str]
    why: NotRequired[str]


class DiagnosisJson(TypedDict):
    """summary.json's `diagnoses`: every verdict, plus the per-request TTFT splits they rest on."""

    effective_concurrency: int | None
    effective_concurrency_raw: float | None
    concurrency_speedup: float | None
    concurrency: ConcurrencyVerdictJson
    head_of_line_blocking: HeadOfLineVerdictJson
    cancel_aborts: CancelVerdictJson
    long_hurt_by_inserts: LongHurtVerdictJson
    silent_gaps: list[SilentGapJson]
    split_evidence: dict[str, int]
    ttft_split: list[TtftSplitJson]


class WhyJson(TypedDict, total=False):
    """A record's reason and what would tell, each written only where it has one."""

    why: str
    would_tell: str


class GranularityJson(TypedDict, total=False):
    """A cancel sample's `granularity`, written only where it has one."""

    granularity: str


class NextJudgedJson(TypedDict, total=False):
    """A cancel sample's `next_delay`, written only where the next request was looked at (null: none was sent)."""

    next_delay: NextDelayJson | None


class HeadOfLineCountsJson(TypedDict, total=False):
    """A head-of-line verdict's counts, written only where it has samples."""

    cause: str | None
    blocked: int
    judged: int
    wait_fraction_p50: float | None
