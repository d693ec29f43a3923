"""The runs a report compares: each finished run with its column label and its per-request files."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalkit.errors import UsageError
from evalkit.report.model_rule import ModelNames
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
    """Labels from `--labels` in run order, else grouped by each manifest's build identity (`grouped_runs`)."""
    return grouped_runs(runs, labels)[0]


def build_identity(run: FinishedRun, model: str | None = None) -> dict[str, str]:
    """What a run's manifest says of the build it measured: its build label, server type and version (or
    llama.cpp's build info), model (`model`: its name by the report's one rule, evalkit.report.model_rule, else the
    manifest's id), and each `--build-info` item. Runs with equal identities measured one build."""
    from evalkit.evidence.server_identity import IdentityRecord

    m = run.manifest
    ident = IdentityRecord.of(m)
    out: dict[str, str] = {}
    if m.get("build_label"):
        out["build label"] = str(m["build_label"])
    if ident.server_type or ident.version_text():
        out["server"] = " ".join(str(x) for x in (ident.server_type, ident.version_text()) if x)
    if model or m.get("model"):
        out["model"] = str(model or m["model"])
    build = m.get("build")
    if isinstance(build, dict):
        out.update({str(k): str(v) for k, v in sorted(build.items())})
    return out


def _identity_label(ident: dict[str, str], differ: list[str]) -> str:
    if "build label" in ident:
        return ident["build label"]
    parts = [ident[k] if k in ("server", "model") else f"{k}={ident[k]}" for k in differ if k in ident]
    return ", ".join(parts)


def _group_key(ident: dict[str, str]) -> tuple[tuple[str, str], ...]:
    # A build label the user gave names the build alone (its runs may differ in model or flags); else the whole
    # identity does.
    if "build label" in ident:
        return (("build label", ident["build label"]),)
    return tuple(sorted(ident.items()))


def grouped_runs(runs: list[FinishedRun], labels: list[str] | None) -> tuple[list[LabelledRun], list[str]]:
    """The runs labelled, and a line saying how: by `--labels` in run order; else by build identity
    (`build_identity`): runs of one identity are one build, named by its build label, else by what differs between
    the builds (server version, model, `--build-info` items). When every run shows one identity and no build label,
    the columns are the run directories' names, and the line says how to name the builds."""
    if labels is not None:
        if len(labels) != len(runs):
            raise UsageError(f"--labels has {len(labels)} labels for {len(runs)} runs")
        return [LabelledRun(str(label), r) for label, r in zip(labels, runs)], []
    models = ModelNames([r.manifest for r in runs])
    idents = [build_identity(r, models.name(i)) for i, r in enumerate(runs)]
    groups: dict[tuple[tuple[str, str], ...], list[int]] = {}
    for i, ident in enumerate(idents):
        groups.setdefault(_group_key(ident), []).append(i)
    keys = sorted({k for ident in idents for k in ident})
    differ = [k for k in keys if len({ident.get(k) for ident in idents}) > 1]
    if len(groups) < 2 and not any("build label" in ident for ident in idents):
        out = [LabelledRun(r.path.name, r) for r in runs]
        said = ", ".join(f"{k} {v}" for k, v in idents[0].items()) if idents and idents[0] else "nothing"
        line = (
            f"report: no --labels, and every run shows one build identity ({said}): each run is its own column, "
            "named by its directory; give each run --build-label (or --build-info commit=...), or pass --labels"
            if len(runs) > 1
            else ""
        )
        return out, [line] if line else []
    names: dict[tuple[tuple[str, str], ...], str] = {}
    for n, (key, members) in enumerate(groups.items(), 1):
        name = _identity_label(idents[members[0]], differ) or f"build {n}"
        while name in names.values():
            name = f"{name} #{n}"
        names[key] = name
    out = [LabelledRun(names[_group_key(idents[i])], r) for i, r in enumerate(runs)]
    lines = [
        f"report: no --labels: {len(runs)} run(s) grouped into {len(groups)} build(s) by the build identity in "
        "each manifest" + (f" (they differ in {', '.join(differ)})" if differ else "")
    ]
    for key, members in groups.items():
        lines.append(f"  {names[key]}: {', '.join(runs[i].path.name for i in members)}")
    return _distinct_labels(out), lines


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
