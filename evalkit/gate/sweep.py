"""`evalkit gate SWEEP_DIR`: every point but the baseline gated against the baseline point, with the same rules
and the same pair logic as two runs (`evalkit.gate.check`); a point that failed to run fails its gate."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.gate import Rule, RuleResult, check, format_table
from evalkit.runs.summaries import FinishedRun, load_runs, runs_by_kind
from evalkit.runs.sweepdir import DONE, finished_runs, read_state


@dataclass(frozen=True)
class PointGate:
    """One point's gate: its rule results, or why it has none (it did not run)."""

    point: str
    results: list[RuleResult]
    failure: str | None = None

    @property
    def passed(self) -> bool:
        """Every rule held and the point ran."""
        return self.failure is None and all(r.passed for r in self.results)


def sweep_runs(sweep_dir: Path) -> tuple[str, dict[str, list[FinishedRun]]]:
    """The baseline point's name and every point's finished runs (for the gate's input checks)."""
    state = read_state(sweep_dir)
    return state.baseline, {p.name: load_runs(finished_runs(sweep_dir, p)) for p in state.points}


def gate_sweep(sweep_dir: Path, rules: list[Rule]) -> list[PointGate]:
    """Gate each point against the sweep's baseline point, in sweep order."""
    state = read_state(sweep_dir)
    base = state.point(state.baseline)
    if base.status != DONE:
        raise UsageError(
            f"{sweep_dir}: the baseline point {base.name} did not run ({base.failure}); nothing to gate against"
        )
    baseline = runs_by_kind(load_runs(finished_runs(sweep_dir, base)), f"baseline point {base.name}'s runs")
    out = []
    for rec in state.points:
        if rec.name == base.name:
            continue
        if rec.status != DONE:
            out.append(PointGate(rec.name, [], f"the point did not run: {rec.failure or rec.status}"))
            continue
        runs = runs_by_kind(load_runs(finished_runs(sweep_dir, rec)), f"point {rec.name}'s runs")
        out.append(PointGate(rec.name, check(rules, runs, baseline)))
    return out


def format_gates(gates: list[PointGate], baseline: str) -> str:
    """Markdown: one section per point with its rules table, or the line saying why it failed."""
    parts = []
    for g in gates:
        parts.append(f"## {g.point} against {baseline}\n")
        parts.append(f"FAIL: {g.failure}" if g.failure else format_table(g.results))
        parts.append("")
    failed = [g.point for g in gates if not g.passed]
    parts.append(
        f"{len(gates) - len(failed)} of {len(gates)} points passed"
        + (f"; failed: {', '.join(failed)}" if failed else "")
    )
    return "\n".join(parts)
