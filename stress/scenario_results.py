"""Per-scenario metrics and the file's expectations, from a run directory's files alone.

The run keeps a copy of its scenario file (`scenarios.toml`), so these can be recomputed from an old run. Only
the lines that count are used (completed cycles, from the attempt that completed each: stress/resume.py).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from evalkit.errors import UsageError
from evalkit.runs.rundir import MANIFEST, REQUESTS, Line, read_json_object, read_jsonl
from evalkit.stats import distribution
from evalkit_stress.resume import CYCLES_FILE, attempt_of, completed_cycles, split_lines
from evalkit_stress.scenario_file import (
    COUNT_METRICS,
    DIST_METRICS,
    Expectation,
    MetricRef,
    ScenarioFile,
    ScenarioSpec,
    parse_scenarios,
)

SCENARIO_COPY = "scenarios.toml"
_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    ">": operator.gt,
}
_COUNT_OUTCOME = {"errors": "error", "wrong_answers": "wrong", "cancelled": "cancelled_as_planned"}
Dist = dict[str, float | int | None]  # evalkit.stats.distribution plus `min`
# One scenario's metrics: counts (`errors`, `short.requests`) and distributions (`short.ttft_s`), by name.
ScenarioMetrics = dict[str, int | Dist]


class ScenarioFileRef(TypedDict):
    """Which scenario file a run read: its label, digest, whether built in, and its `[run]` table."""

    label: str
    sha256: str
    builtin: bool
    run: str


class ScenarioEntry(TypedDict):
    """summary.json's `scenarios` entry: the scenario's metrics and the ones its file reports."""

    metrics: ScenarioMetrics
    report: list[str]


class ExpectationJson(TypedDict):
    """summary.json's `expectations` entry (an ExpectationResult's fields)."""

    scenario: str
    expect: str
    value: float | None
    passed: bool
    limit: float
    why: str | None


class ScenarioResults(TypedDict, total=False):
    """The scenario part of a stress summary; empty (no key) for a run that kept no scenario file."""

    scenario_file: ScenarioFileRef
    scenarios: dict[str, ScenarioEntry]
    expectations: list[ExpectationJson]
    expectations_failed: int


@dataclass(frozen=True)
class ExpectationResult:
    """One expectation's verdict and the figure it rests on."""

    scenario: str
    expect: str
    value: float | None
    passed: bool
    limit: float
    why: str | None = None

    def line(self) -> str:
        """`PASS cancel_while_streaming: after_cancel.ttft_s.p95 <= 2.0 (got 0.61)`."""
        got = "no samples" if self.value is None else f"got {self.value:.4g}"
        return f"{'PASS' if self.passed else 'FAIL'} {self.scenario}: {self.expect} ({got}, limit {self.limit:.4g})"


def _sample(r: Line, metric: str) -> float | None:
    if r.get("status") != "ok":
        return None  # a failed or cancelled request has no timing of the server's to report
    if metric == "latency_s":
        return None if r.get("t_done") is None or r.get("t_sent") is None else r["t_done"] - r["t_sent"]
    return r.get(metric)


def _dist(lines: list[Line], metric: str) -> Dist:
    xs = [v for v in (_sample(r, metric) for r in lines) if v is not None]
    return {**distribution(xs), "min": min(xs) if xs else None}


def _count(lines: list[Line], metric: str) -> int:
    if metric == "requests":
        return len(lines)
    return sum(r.get("outcome") == _COUNT_OUTCOME[metric] for r in lines)


def scenario_metrics(spec: ScenarioSpec, lines: list[Line]) -> ScenarioMetrics:
    """Every metric of one scenario, over all its requests and per role (`short.ttft_s`)."""
    mine = [r for r in lines if r.get("scenario") == spec.name]
    groups: dict[str | None, list[Line]] = {None: mine}
    role: str | None
    for role in dict.fromkeys(r.role for r in spec.requests):
        groups[role] = [r for r in mine if r.get("role") == role]
    out: ScenarioMetrics = {}
    for role, group in groups.items():
        prefix = f"{role}." if role else ""
        for m in COUNT_METRICS:
            out[prefix + m] = _count(group, m)
        for m in DIST_METRICS:
            out[prefix + m] = _dist(group, m)
    return out


def value_of(metrics: ScenarioMetrics, ref: MetricRef) -> float | None:
    """The figure an expectation or report line names."""
    v = metrics.get(ref.key)
    if isinstance(v, dict):
        return v.get(ref.stat or "p50")
    return v


def limit_of(e: Expectation, time_scale: float) -> float:
    """The file's limit in the run's units: its seconds are real ones, so a sped-up run's are F times shorter."""
    if e.ref.metric.endswith("tok_s"):
        return e.value * time_scale
    if e.ref.metric.endswith("_s"):
        return e.value / time_scale
    return e.value


def check(spec: ScenarioSpec, metrics: ScenarioMetrics, e: Expectation, time_scale: float = 1.0) -> ExpectationResult:
    """Whether `e` holds; no sample at all is a failure (nothing showed the expected behaviour)."""
    v = value_of(metrics, e.ref)
    limit = limit_of(e, time_scale)
    if v is None:
        return ExpectationResult(spec.name, e.text, None, False, limit, "no samples")
    return ExpectationResult(spec.name, e.text, float(v), _OPS[e.op](float(v), limit), limit)


def _expectation_json(c: ExpectationResult) -> ExpectationJson:
    return {
        "scenario": c.scenario,
        "expect": c.expect,
        "value": c.value,
        "passed": c.passed,
        "limit": c.limit,
        "why": c.why,
    }


def results_from_lines(source: ScenarioFile, lines: list[Line], time_scale: float = 1.0) -> ScenarioResults:
    """summary.json's `scenarios` (metrics per scenario) and `expectations` (pass/fail lines)."""
    scenarios: dict[str, ScenarioEntry] = {}
    checks: list[ExpectationResult] = []
    for spec in source.scenarios:
        metrics = scenario_metrics(spec, lines)
        scenarios[spec.name] = {"metrics": metrics, "report": [r.key for r in spec.report]}
        checks.extend(check(spec, metrics, e, time_scale) for e in spec.expect)
    return {
        "scenario_file": {"label": source.label, "sha256": source.sha256, "builtin": source.builtin, "run": source.run},
        "scenarios": scenarios,
        "expectations": [_expectation_json(c) for c in checks],
        "expectations_failed": sum(not c.passed for c in checks),
    }


def scenario_summary(run_path: Path) -> ScenarioResults:
    """The scenario part of a stress summary, recomputed from `run_path` (empty when the run kept no file)."""
    copy = run_path / SCENARIO_COPY
    if not copy.exists():
        return {}
    manifest = read_json_object(run_path / MANIFEST)
    label = (manifest.get("stress") or {}).get("scenario_file") or SCENARIO_COPY
    source = parse_scenarios(
        copy.read_text(encoding="utf-8"), label, builtin=bool((manifest.get("stress") or {}).get("scenario_builtin"))
    )
    completed = completed_cycles(read_jsonl(run_path / CYCLES_FILE))
    calibration = (manifest.get("tokenization") or {}).get("attempt")
    split = split_lines(read_jsonl(run_path / REQUESTS), completed, attempt_of(manifest), calibration)
    return results_from_lines(source, split.counted, float((manifest.get("stress") or {}).get("time_scale") or 1.0))


def summary_lines(s: dict[str, Any]) -> list[str]:
    """The terminal lines of a user file's scenarios (from the whole summary.json as written): counts, reported
    metrics, then each expectation."""
    out = []
    for name, sc in (s.get("scenarios") or {}).items():
        m = sc["metrics"]
        out.append(
            f"  scenario {name}: {m['requests']} requests, {m['errors']} errors, "
            f"{m['wrong_answers']} wrong answers, {m['cancelled']} cancelled as planned"
        )
        for key in sc["report"]:
            v = m.get(key)
            if isinstance(v, dict):
                shown = (
                    "-"
                    if v["p50"] is None
                    else (
                        f"p50 {v['p50']:.3g}  p95 {v['p95']:.3g}  min {v['min']:.3g}  max {v['max']:.3g}  (n={v['n']})"
                    )
                )
            else:
                shown = str(v)
            out.append(f"    {key:<30} {shown}")
    for e in s.get("expectations") or []:
        out.append("  " + ExpectationResult(**e).line())
    return out


def check_same_scenarios(run_path: Path, source: ScenarioFile) -> None:
    """Exit 2 when resuming a run that was started from a different scenario file (a resume must not mix two)."""
    man = run_path / MANIFEST
    if not man.exists():
        return
    stress = read_json_object(man).get("stress") or {}
    old = stress.get("scenario_sha256")
    if old is None and source.builtin:
        return  # a run from before scenario files ran the built-in cycle
    if old != source.sha256:
        was = stress.get("scenario_file") or "the built-in cycle"
        raise UsageError(
            f"cannot resume {run_path}: --scenario is {source.label} but the run was started with {was} "
            "(a different file); use the same scenario file or a new --name"
        )
