"""The runs a report compares: each finished run with its column label and its per-request files."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalkit.errors import UsageError
from evalkit.runs.rundir import Line, read_jsonl
from evalkit.runs.schemas import (
    BenchSummary,
    CapabilitySummary,
    GradedLine,
    KindSummary,
    LoadSummary,
    RequestLine,
    Score,
    StressSummary,
    TaggedRequestLine,
)
from evalkit.runs.summaries import FinishedRun


@dataclass(frozen=True)
class LabelledRun:
    """A run and the label of its column."""

    label: str
    run: FinishedRun

    @property
    def kind(self) -> str:
        """The run's kind."""
        return self.run.kind

    @property
    def summary(self) -> dict[str, Any]:
        """The run's summary.json."""
        return self.run.summary

    @property
    def record(self) -> KindSummary:
        """The run's summary as its kind's typed record."""
        return self.run.record

    def bench(self) -> BenchSummary:
        """A bench run's record; an incomplete one without its figures reads as no prompts."""
        rec = self.run.record
        return rec if isinstance(rec, BenchSummary) else BenchSummary(kind="bench", prompts={})

    def capability(self) -> CapabilitySummary:
        """A capability run's record; an incomplete one without its scores reads as none."""
        rec = self.run.record
        if isinstance(rec, CapabilitySummary):
            return rec
        return CapabilitySummary(kind="capability", scores={}, total=Score(correct=0, total=0))

    def raw_requests(self) -> list[Line]:
        """The run's requests.jsonl lines that its summary counts, as written: for the measurement's own functions
        (stress's exercised and pair statistics, the evidence's TTFT split), which read lines as written.

        A resumed stress run keeps the lines of attempts cut off mid-cycle on disk; its summary's
        `cycle_attempts` says which attempt completed each cycle, and only those lines are samples.
        """
        lines = read_jsonl(self.run.path / "requests.jsonl", RequestLine)
        completed = self.completed_attempts()
        if not completed:
            return lines
        from evalkit_stress.resume import in_counted_cycle

        return [r for r in lines if in_counted_cycle(r, completed)]

    def requests(self) -> list[TaggedRequestLine]:
        """The run's requests.jsonl lines that its summary counts, as records (`raw_requests`)."""
        lines = list(self.run.request_records)
        completed = self.completed_attempts()
        if not completed:
            return lines
        from evalkit_stress.resume import counted_attempt

        return [r for r in lines if counted_attempt(r.cycle or 0, r.attempt or 0, completed)]

    def completed_attempts(self) -> dict[int, int]:
        """A stress run's attempt that completed each cycle (empty for other kinds and older runs)."""
        s = self.stress()
        if self.kind != "stress" or s is None or not s.cycle_attempts:
            return {}
        return {int(k): int(v) for k, v in s.cycle_attempts.items()}

    def load(self) -> LoadSummary | None:
        """A load run's record (None for a run of another kind)."""
        rec = self.run.record
        return rec if isinstance(rec, LoadSummary) else None

    def stress(self) -> StressSummary | None:
        """A stress run's record (None for an incomplete run without its figures, or a run of another kind)."""
        rec = self.run.record
        return rec if isinstance(rec, StressSummary) else None

    def graded(self) -> list[GradedLine]:
        """The run's graded.jsonl lines (empty when it has none)."""
        return list(self.run.graded_records)


def label_runs(runs: list[FinishedRun], labels: list[str] | None) -> list[LabelledRun]:
    """Labels from `--labels` in run order, else each manifest's `build_label`, else the directory name."""
    if labels is not None and len(labels) != len(runs):
        raise UsageError(f"--labels has {len(labels)} labels for {len(runs)} runs")
    out = []
    for i, r in enumerate(runs):
        label = labels[i] if labels else (r.manifest.get("build_label") or r.path.name)
        out.append(LabelledRun(str(label), r))
    return out if labels else _distinct_labels(out)


def _distinct_labels(runs: list[LabelledRun]) -> list[LabelledRun]:
    """Two runs of one kind under one build label (one build, two flag sets) get their directory name beside it."""
    seen: dict[tuple[str, str], int] = {}
    for r in runs:
        key = (r.kind, r.label)
        seen[key] = seen.get(key, 0) + 1
    return [LabelledRun(f"{r.label} ({r.run.path.name})", r.run) if seen[(r.kind, r.label)] > 1 else r for r in runs]


def columns(runs: list[LabelledRun]) -> list[str]:
    """Column labels: the build label, with the run's kind beside it where one label has several runs."""
    labels = [r.label for r in runs]
    return [f"{r.label} {r.kind}" if labels.count(r.label) > 1 else r.label for r in runs]
