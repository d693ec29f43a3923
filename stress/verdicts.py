"""The records of a stress run's diagnoses (summary.json's `diagnoses`): each verdict, its samples and figures.

stress/judge_*.py build them (stress/diagnose.py gathers them); `to_json` turns them into the JSON the run file holds
(stress/verdict_json.py), each key in the order run files have always had it (a key a record leaves out is absent,
not null, where old runs had it absent), so a report renders an old run and a new one alike. Keys are identifiers;
the words a reader sees are values (`cause`, `why`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evalkit.evidence.ttft_split import TtftSplit
from evalkit.evidence.wait_parts import SilentGap
from evalkit_stress.verdict_json import (
    CancelSampleJson,
    CancelVerdictJson,
    ConcurrencyFiguresJson,
    ConcurrencyVerdictJson,
    DiagnosisJson,
    Figures,
    GranularityJson,
    HeadOfLineCountsJson,
    HeadOfLineFiguresJson,
    HeadOfLineSampleJson,
    HeadOfLineVerdictJson,
    LongHurtVerdictJson,
    NextDelayJson,
    NextJudgedJson,
    StepsFigures,
    WhyJson,
)

YES, NO, CANT = "yes", "no", "can't tell"
NOT_EXERCISED = "not exercised"  # the situation never happened (stress/exercised.py): nothing to judge


def _why(why: str | None, would_tell: str | None) -> WhyJson:
    """The reason and what would tell, each only where it has a value, in that order."""
    out: WhyJson = {}
    if why is not None:
        out["why"] = why
    if would_tell is not None:
        out["would_tell"] = would_tell
    return out


@dataclass(frozen=True)
class NextDelay:
    """What held the request sent after a cancel until the server started on it; `parts_s` None: the client alone
    could not split its wait."""

    evidence: str
    cause: str  # the largest part, in words (stress/wait_parts.py WORDS), or CANT
    parts_s: dict[str, float] | None = None  # by part identifier (stress/wait_parts.py)
    wait_s: float | None = None
    prefill_s: float | None = None
    ttft_s: float | None = None  # the client's figure, when nothing splits it
    would_tell: str | None = None

    def to_json(self) -> NextDelayJson:
        """The record as summary.json holds it."""
        if self.parts_s is None:
            return {
                "evidence": self.evidence,
                "ttft_s": self.ttft_s,
                "cause": self.cause,
                "would_tell": self.would_tell,
            }
        out: NextDelayJson = {
            "evidence": self.evidence,
            "wait_s": self.wait_s,
            "parts_s": self.parts_s,
            "cause": self.cause,
            "prefill_s": self.prefill_s,
        }
        if self.would_tell is not None:
            out["would_tell"] = self.would_tell
        return out


@dataclass
class CancelSample:
    """One cancelled long request: did the engine stop on it, how soon, and what held the next request."""

    verdict: str
    evidence: str
    figures: Figures
    granularity: str | None = None  # when it stopped: at once, at a batch boundary, only at the end, ...
    why: str | None = None
    would_tell: str | None = None
    # When the engine stopped working on it (epoch, from the evidence): where the next request's wait is split.
    # Not written: the figures give it relative to the cancel.
    engine_stopped: float | None = None
    next_judged: bool = False  # whether the next request's wait was looked at (`next_delay`, null with none sent)
    next_delay: NextDelay | None = None
    cycle: int | None = None
    request_id: str | None = None

    def judge_next(self, delay: NextDelay | None) -> None:
        """Set what held the next request (None: there was none)."""
        self.next_judged, self.next_delay = True, delay

    def to_json(self) -> CancelSampleJson:
        """The record as summary.json holds it."""
        if self.verdict == NOT_EXERCISED:
            out: CancelSampleJson = {
                "verdict": self.verdict,
                "evidence": self.evidence,
                "figures": self.figures,
                "cycle": self.cycle,
                "request_id": self.request_id,
            }
            if self.why is not None:
                out["why"] = self.why
            if self.would_tell is not None:
                out["would_tell"] = self.would_tell
            return out
        gran: GranularityJson = {} if self.granularity is None else {"granularity": self.granularity}
        judged: NextJudgedJson = {}
        if self.next_judged:
            judged["next_delay"] = None if self.next_delay is None else self.next_delay.to_json()
        return {
            "verdict": self.verdict,
            "evidence": self.evidence,
            **gran,
            "figures": self.figures,
            **_why(self.why, self.would_tell),
            **judged,
            "cycle": self.cycle,
            "request_id": self.request_id,
        }


@dataclass(frozen=True)
class CancelVerdict:
    """Did the engine stop working on a cancelled long request (`aborts`), over the run's cycles."""

    verdict: str
    aborts: bool | None
    evidence: str
    samples: list[CancelSample]
    granularity: str | None = None
    stop_after_cancel_s_max: float | None = None
    judged_cycles: int = 0
    not_exercised_cycles: int = 0
    next_delay_cause: str | None = None
    why: str | None = None
    would_tell: str | None = None

    def to_json(self) -> CancelVerdictJson:
        """The record as summary.json holds it."""
        if not self.samples:
            return {
                "verdict": self.verdict,
                "aborts": self.aborts,
                "evidence": self.evidence,
                "judged_cycles": self.judged_cycles,
                "samples": [],
                "why": self.why,
                "would_tell": self.would_tell,
            }
        return {
            "verdict": self.verdict,
            "aborts": self.aborts,
            "evidence": self.evidence,
            "granularity": self.granularity,
            "stop_after_cancel_s_max": self.stop_after_cancel_s_max,
            "judged_cycles": self.judged_cycles,
            "not_exercised_cycles": self.not_exercised_cycles,
            "samples": [s.to_json() for s in self.samples],
            "next_delay_cause": self.next_delay_cause,
            **_why(self.why, self.would_tell),
        }


@dataclass(frozen=True)
class HeadOfLineFigures:
    """An inserted short request against the long prefill it landed in; the server-side figures when known."""

    ttft_s: float
    long_prefill_left_s: float
    wait_before_start_s: float | None = None
    in_launched_slot_s: float | None = None
    wait_parts_s: dict[str, float] | None = None  # by part identifier (stress/wait_parts.py)
    steps: StepsFigures | None = None  # vLLM's step log: the token counts that settled it, and the record

    def to_json(self) -> HeadOfLineFiguresJson:
        """The record as summary.json holds it."""
        out: HeadOfLineFiguresJson = {"ttft_s": self.ttft_s, "long_prefill_left_s": self.long_prefill_left_s}
        if self.wait_before_start_s is not None:
            out["wait_before_start_s"] = self.wait_before_start_s
        if self.in_launched_slot_s is not None:
            out["in_launched_slot_s"] = self.in_launched_slot_s
        if self.wait_parts_s is not None:
            out["wait_parts_s"] = self.wait_parts_s
        if self.steps is not None:
            out["steps"] = self.steps
        return out


@dataclass(frozen=True)
class HeadOfLineSample:
    """One inserted short request: did it wait out the long prefill, and for what (in words)."""

    verdict: str
    evidence: str
    cause: str | None
    figures: HeadOfLineFigures
    request_id: str

    def to_json(self) -> HeadOfLineSampleJson:
        """The record as summary.json holds it."""
        return {
            "verdict": self.verdict,
            "evidence": self.evidence,
            "cause": self.cause,
            "figures": self.figures.to_json(),
            "request_id": self.request_id,
        }


@dataclass(frozen=True)
class HeadOfLineVerdict:
    """Did inserted short requests wait for another request's prefill (`detected`), over the run."""

    verdict: str
    detected: bool | None
    evidence: str
    samples: list[HeadOfLineSample]
    cause: str | None = None
    blocked: int = 0
    judged: int = 0
    wait_fraction_p50: float | None = None
    why: str | None = None
    would_tell: str | None = None

    def to_json(self) -> HeadOfLineVerdictJson:
        """The record as summary.json holds it."""
        counts: HeadOfLineCountsJson = {}
        if self.samples:
            counts = {
                "cause": self.cause,
                "blocked": self.blocked,
                "judged": self.judged,
                "wait_fraction_p50": self.wait_fraction_p50,
            }
        return {
            "verdict": self.verdict,
            "detected": self.detected,
            "evidence": self.evidence,
            **counts,
            "samples": [s.to_json() for s in self.samples],
            **_why(self.why, self.would_tell),
        }


@dataclass(frozen=True)
class LongHurtVerdict:
    """Is the long request's own prefill slower with inserted shorts than alone (`detected`)."""

    verdict: str
    detected: bool | None
    evidence: str
    ratio_p50: float | None
    figures: dict[str, float | None]
    why: str | None = None
    would_tell: str | None = None

    def to_json(self) -> LongHurtVerdictJson:
        """The record as summary.json holds it."""
        return {
            "verdict": self.verdict,
            "detected": self.detected,
            "evidence": self.evidence,
            "ratio_p50": self.ratio_p50,
            "figures": self.figures,
            **_why(self.why, self.would_tell),
        }


@dataclass(frozen=True)
class ConcurrencyFigures:
    """Each stream alone and together (p50s of the run's metrics)."""

    gen_alone_tok_s: float | None
    concurrent_stream_tok_s: float | None
    concurrent_combined_tok_s: float | None
    effective_concurrency: float | None
    concurrency_speedup: float | None

    def to_json(self) -> ConcurrencyFiguresJson:
        """The record as summary.json holds it."""
        return {
            "gen_alone_tok_s": self.gen_alone_tok_s,
            "concurrent_stream_tok_s": self.concurrent_stream_tok_s,
            "concurrent_combined_tok_s": self.concurrent_combined_tok_s,
            "effective_concurrency": self.effective_concurrency,
            "concurrency_speedup": self.concurrency_speedup,
        }


@dataclass(frozen=True)
class ConcurrencyVerdict:
    """Were two generations served together, from measured figures only."""

    verdict: str
    evidence: str
    figures: ConcurrencyFigures
    would_tell: str | None = None
    why: str | None = None

    def to_json(self) -> ConcurrencyVerdictJson:
        """The record as summary.json holds it (`would_tell` before `why`, as written)."""
        out: ConcurrencyVerdictJson = {
            "verdict": self.verdict,
            "evidence": self.evidence,
            "figures": self.figures.to_json(),
        }
        if self.would_tell is not None:
            out["would_tell"] = self.would_tell
        if self.why is not None:
            out["why"] = self.why
        return out


@dataclass(frozen=True)
class Diagnosis:
    """Every verdict of a stress run with its evidence and figures, plus the per-request TTFT splits they rest on."""

    effective_concurrency: int | None
    effective_concurrency_raw: float | None
    concurrency_speedup: float | None
    concurrency: ConcurrencyVerdict
    head_of_line_blocking: HeadOfLineVerdict
    cancel_aborts: CancelVerdict
    long_hurt_by_inserts: LongHurtVerdict
    silent_gaps: list[SilentGap]
    split_evidence: dict[str, int]  # requests per evidence their split rests on
    ttft_split: list[TtftSplit]

    def to_json(self) -> DiagnosisJson:
        """The record as summary.json holds it (`diagnoses`)."""
        return {
            "effective_concurrency": self.effective_concurrency,
            "effective_concurrency_raw": self.effective_concurrency_raw,
            "concurrency_speedup": self.concurrency_speedup,
            "concurrency": self.concurrency.to_json(),
            "head_of_line_blocking": self.head_of_line_blocking.to_json(),
            "cancel_aborts": self.cancel_aborts.to_json(),
            "long_hurt_by_inserts": self.long_hurt_by_inserts.to_json(),
            "silent_gaps": [g.to_json() for g in self.silent_gaps],
            "split_evidence": self.split_evidence,
            "ttft_split": [s.to_json() for s in self.ttft_split],
        }


def _number(v: Any) -> float | None:
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _count(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _numbers(v: Any) -> dict[str, float]:
    return {k: x for k, x in v.items() if _number(x) is not None} if isinstance(v, dict) else {}


@dataclass(frozen=True)
class DelayReading:
    """A cancel sample's `next_delay`: how long the request sent after the cancel waited, its first token, and the
    parts of its wait (numbers only)."""

    wait_s: float | None = None
    ttft_s: float | None = None
    parts_s: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_json(cls, d: Any) -> DelayReading:
        """The reading of a `next_delay` record (an empty one where it is not an object)."""
        if not isinstance(d, dict):
            return cls()
        return cls(_number(d.get("wait_s")), _number(d.get("ttft_s")), _numbers(d.get("parts_s")))


@dataclass(frozen=True)
class SampleReading:
    """One sample behind a verdict: for head-of-line blocking, the short request's wait before the server started
    on it and that wait's parts; for a cancel, the next request's delay."""

    wait_before_start_s: float | None = None
    wait_parts_s: dict[str, float] = field(default_factory=dict)
    next_delay: DelayReading | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SampleReading:
        """The reading of one sample record."""
        f = d.get("figures")
        f = f if isinstance(f, dict) else {}
        nd = d.get("next_delay")
        return cls(
            _number(f.get("wait_before_start_s")),
            _numbers(f.get("wait_parts_s")),
            DelayReading.from_json(nd) if nd else None,
        )


@dataclass(frozen=True)
class VerdictReading:
    """Any verdict of summary.json's `diagnoses` as a reader shows it, from a run file of any evalkit version: the
    answer and its evidence, what it waited for, the figures it names, its samples, and for "can't tell" why and
    what would."""

    verdict: str
    evidence: Any = "client"
    granularity: str | None = None
    cause: str | None = None
    next_delay_cause: str | None = None
    ratio_p50: float | None = None
    stop_after_cancel_s_max: float | None = None
    why: str | None = None
    would_tell: str | None = None
    blocked: int | None = None
    judged: int | None = None
    wait_fraction_p50: float | None = None
    figures: dict[str, float | None] = field(default_factory=dict)  # numbers, and None for a figure not measured
    samples: tuple[SampleReading, ...] = ()

    @classmethod
    def from_json(cls, d: Any) -> VerdictReading | None:
        """The reading of one verdict record; None for a missing one (an older run without that verdict)."""
        if not isinstance(d, dict) or "verdict" not in d:
            return None
        figures = d.get("figures")
        return cls(
            d["verdict"],
            d.get("evidence", "client"),
            **{
                k: d.get(k)
                for k in (
                    "granularity",
                    "cause",
                    "next_delay_cause",
                    "ratio_p50",
                    "stop_after_cancel_s_max",
                    "why",
                    "would_tell",
                )
            },
            blocked=_count(d.get("blocked")),
            judged=_count(d.get("judged")),
            wait_fraction_p50=_number(d.get("wait_fraction_p50")),
            figures=(
                {k: v for k, v in figures.items() if v is None or _number(v) is not None}
                if isinstance(figures, dict)
                else {}
            ),
            samples=tuple(SampleReading.from_json(x) for x in d.get("samples") or [] if isinstance(x, dict)),
        )
