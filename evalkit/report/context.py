"""The context a report template receives, typed: report.md.j2, report.html.j2, sweep.md.j2 and a user's own
template (`--template`, docs/bench-report-gate.md) read these keys. They are TypedDicts, so a template gets plain
dicts as before (`section.heading` and `section["heading"]` both work) and mypy checks every key a builder writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

from evalkit.runs.evidence_parts import FlaggedLineJson
from evalkit.runs.json_value import JsonValue

if TYPE_CHECKING:
    from evalkit.report.lanes import Lane
    from evalkit.report.tables import Table


@dataclass(frozen=True)
class AnswerLine:
    """One line of a build's summary: the topic, the sentence with its figures, the mark and the metric key."""

    topic: str
    text: str
    mark: str = ""
    key: str = ""
    flags: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class BuildAnswer:
    """A candidate build's summary against the baseline."""

    label: str
    baseline: str
    lines: list[AnswerLine]


@dataclass(frozen=True)
class Build:
    """A build as the report names it: its label, its identity line, its runs' kinds and its settings."""

    label: str
    identity: str
    kinds: list[str]
    settings: dict[str, str]


class SectionVerdict(TypedDict):
    """A load section's verdict of one run against the first."""

    label: str
    mark: str
    sentence: str


class _SectionBase(TypedDict):
    kind: str
    heading: str
    tables: list[Table]


class SectionContext(_SectionBase, total=False):
    """One kind's section: heading and tables, and for load the verdicts above them."""

    verdicts: list[SectionVerdict]


class RunEntry(TypedDict):
    """A run as the report lists it (from its manifest)."""

    label: str
    kind: str
    path: str
    model: object
    started: object
    build_label: object


class PlotEntry(TypedDict):
    """A PNG written beside the markdown: its title and file name."""

    title: str
    file: str


class FigurePlot(PlotEntry):
    """A sweep's key-figure plot: a PNG, and the summary value it draws (`<kind>.<path>`)."""

    metric: str


class MemoryVerdict(TypedDict):
    """A stress run's GPU memory verdict line."""

    label: str
    verdict: str
    evidence: str | None


class MemoryContext(TypedDict):
    """The GPU memory section: each run's verdict line and the per-card table."""

    heading: str
    verdicts: list[MemoryVerdict]
    table: Table
    runs: list[str]


class FlaggedLog(TypedDict):
    """A run's flagged server-log lines (the first 12) and how many more."""

    label: str
    kind: str
    path: str | None
    lines: list[FlaggedLineJson]  # as the log capture wrote them (evalkit.evidence.server_log)
    more: int


class ServerSaysContext(TypedDict):
    """The "what the server says" section: its tables, warnings and flagged log lines."""

    heading: str
    tables: list[Table]
    warnings: list[str]
    flagged: list[FlaggedLog]


class AnswerContext(TypedDict):
    """The answer at the top: builds, what differs between them, the per-build summaries, flagged runs, time
    bases."""

    builds: list[Build]
    differ: list[tuple[str, list[str]]]
    same: dict[str, str]
    answers: list[BuildAnswer]
    flagged: list[str]
    time_bases: list[str]


class ReportContext(TypedDict):
    """What report.md.j2 (and a user's template) receives; `summaries` are the runs' summary.json as written."""

    title: str
    runs: list[RunEntry]
    sections: list[SectionContext]
    tables: dict[str, Table]
    memory: MemoryContext | None
    server_says: ServerSaysContext | None
    plots: list[PlotEntry]
    summaries: dict[str, dict[str, JsonValue]]
    answer: AnswerContext


class FailedPoint(TypedDict):
    """A sweep point that did not finish: why, and its log's tail."""

    name: str
    failure: str
    log_tail: list[str]


class SweepContext(ReportContext):
    """A sweep's report (sweep.md.j2): the report's context over every point's runs, the points table, the points
    that failed, and the key figures' plots."""

    points: Table
    failed: list[FailedPoint]
    figure_plots: list[FigurePlot]
    key_figures: list[str]
    paired: list[Table]  # an interleaved sweep's two points round by round (empty for another sweep)


class LaneEntry(TypedDict):
    """One request's lane on the page's timeline: its name, its figures and its phases (name, start, end)."""

    name: str
    lane: Lane
    phases: list[tuple[str, float, float]]


class TimelineEntry(TypedDict):
    """One stress cycle's timeline on the page."""

    label: str
    cycle: int
    first: bool
    id: str
    div: str
    lanes: list[LaneEntry]
    axis: str


class FlipSide(TypedDict):
    """One run's answer to a changed question on the page (every value None where the run has no line)."""

    extracted: object
    outcome: str | None
    rule: str | None
    why: str | None
    content: str | None
    reasoning: str | None


class FlipEntry(TypedDict):
    """A question whose grade changed between two capability runs, both answers side by side on the page."""

    mode: str
    id: str
    dataset: str
    change: str
    before_label: str
    after_label: str
    before: FlipSide
    after: FlipSide
    comparable: bool
