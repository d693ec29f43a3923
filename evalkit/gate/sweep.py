"""`evalkit gate SWEEP_DIR`: every point but the baseline gated against the baseline point, with the same rules
and the same pair logic as two runs (`evalkit.gate.check`); a point that failed to run fails its gate.

An interleaved sweep (`[interleave]`) gates its other point against the baseline point round by round: a relative or
offset rule's limit is set in each round from that round's baseline value, the rule holds when the median over the
rounds meets the median limit, and a miss fails only when the shortfall is beyond noise by the paired test
(`evalkit.comparison.compare_paired` on the per-round values against the per-round limits); a miss the rounds cannot
tell from noise is "not decided". A rule with a fixed value holds in every round."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

from evalkit import comparison
from evalkit.errors import UsageError
from evalkit.gate import OPS, Rule, RuleResult, check, format_table
from evalkit.runs.paired_rounds import Rounds, reachable, sweep_rounds
from evalkit.runs.summaries import FinishedRun, load_runs, runs_by_kind
from evalkit.runs.sweepdir import DONE, finished_runs, read_state

PASS, FAIL, NOT_DECIDED = "pass", "FAIL", "not decided"


@dataclass(frozen=True)
class PointGate:
    """One point's gate: its rule results, or why it has none (it did not run); for an interleaved sweep's point,
    how each rule was weighed over the rounds (`how`, by rule index)."""

    point: str
    results: list[RuleResult]
    failure: str | None = None
    how: dict[int, str] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """Every rule held and the point ran."""
        return self.failure is None and all(r.passed for r in self.results)

    @property
    def verdict(self) -> str:
        """pass; FAIL (a rule failed, or the point did not run); not decided (no rule failed, one missed its limit by
        a shortfall the data cannot tell from noise)."""
        if self.failure is not None or any(r.failed for r in self.results):
            return FAIL
        return PASS if self.passed else NOT_DECIDED


def exit_code(gates: list[PointGate]) -> int:
    """`evalkit gate SWEEP_DIR`'s exit code: 0 every point passed, 1 one failed, 3 none failed but one is not
    decided."""
    verdicts = {g.verdict for g in gates}
    return 1 if FAIL in verdicts else 3 if NOT_DECIDED in verdicts else 0


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
    rounds = sweep_rounds(sweep_dir, state)
    if rounds is not None:
        other = state.point(rounds.other)
        if other.status != DONE:
            return [PointGate(other.name, [], f"the point did not run: {other.failure or other.status}")]
        return [gate_rounds(rules, rounds)]
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


def _paired_rules(rules: list[Rule], rounds: Rounds) -> dict[int, tuple[RuleResult, str]]:
    """The relative and offset rules over the rounds, by index: each one's limit set per round from that round's
    baseline value; the medians over the rounds meet the median limit (pass), or the shortfall is weighed by the
    paired test of the per-round values against the per-round limits, the missed rules one Holm family: beyond
    noise fails, else not decided."""
    out: dict[int, tuple[RuleResult, str]] = {}
    missed: list[tuple[int, RuleResult, comparison.Comparison, bool]] = []
    for i, rule in enumerate(rules):
        if rule.limit_kind == "value":
            continue
        before, after = rounds.values(rule.metric)
        pairs = [(b, a) for b, a in zip(before, after) if b is not None and a is not None]
        if not pairs:
            raise UsageError(f"rule {rule.name!r}: {rule.metric} not found in any round of both points")
        base, value = median(b for b, _ in pairs), median(a for _, a in pairs)
        limit = rule.amount * base if rule.limit_kind == "relative" else base + rule.amount
        result = RuleResult(rule, value, limit, base, OPS[rule.op](value, limit))
        if result.passed or rule.op in ("==", "!="):
            out[i] = (result, f"paired over {len(pairs)} rounds: the medians {'meet' if result.passed else 'miss'} it")
            continue
        limits = [
            None if b is None else b * rule.amount if rule.limit_kind == "relative" else b + rule.amount for b in before
        ]
        higher = rule.op in (">", ">=")
        missed.append((i, result, comparison.compare_paired(limits, after, higher, noise_floor=0.0), higher))
    adjusted = comparison.holm([c for _, _, c, _ in missed], [h for *_, h in missed], comparison.LEVEL, 0.0)
    for (i, r, _, _), c in zip(missed, adjusted):
        c = reachable(c)
        how = f"paired over {c.n_before} rounds (signed-rank): " + (
            f"can't tell, {c.why}" if c.why else f"p={c.p:.3g} at level {c.level:.3g}"
        )
        if c.mark == comparison.WORSE:
            why = f"short of the limit beyond noise, {how}"
            out[i] = (RuleResult(r.rule, r.value, r.limit, r.baseline, False, True, why), why)
        else:
            why = f"can't tell: short of the limit within noise, {how}" if not c.why else f"{how}"
            out[i] = (RuleResult(r.rule, r.value, r.limit, r.baseline, False, False, why), why)
    return out


def gate_rounds(rules: list[Rule], rounds: Rounds) -> PointGate:
    """An interleaved sweep's other point against its baseline point, round by round: relative and offset rules
    paired (`_paired_rules`), a rule with a fixed value held in every round the point finished."""
    paired = _paired_rules(rules, rounds)
    results, how = [], {}
    for i, rule in enumerate(rules):
        if i in paired:
            results.append(paired[i][0])
            how[i] = paired[i][1]
            continue
        held = [(r, check([rule], runs, None)[0]) for r, runs in enumerate(rounds.other_rounds, 1) if runs]
        if not held:
            raise UsageError(f"rule {rule.name!r}: no round of point {rounds.other} ran")
        missed = [(r, res) for r, res in held if not res.passed]
        r, res = missed[0] if missed else held[-1]
        how[i] = f"missed in round {r}" if missed else f"held in each of {len(held)} rounds"
        results.append(res)
    return PointGate(rounds.other, results, None, how)


def format_rounds(g: PointGate) -> str:
    """An interleaved point's rules table: value and limit (medians over the rounds), verdict and how it was
    weighed."""
    lines = ["| rule | value | limit | verdict | how |", "| --- | ---: | ---: | --- | --- |"]
    for i, r in enumerate(g.results):
        lines.append(f"| `{r.rule.describe()}` | {r.value:.6g} | {r.limit:.6g} | {r.verdict} | {g.how.get(i, '')} |")
    failed = sum(r.failed for r in g.results)
    open_ = sum(not r.passed and not r.decided for r in g.results)
    lines += [
        "",
        f"{len(g.results) - failed - open_} passed, {failed} failed" + (f", {open_} not decided" if open_ else ""),
    ]
    return "\n".join(lines)


def format_gates(gates: list[PointGate], baseline: str) -> str:
    """Markdown: one section per point with its rules table, or the line saying why it failed."""
    parts = []
    for g in gates:
        parts.append(f"## {g.point} against {baseline}\n")
        if g.failure:
            parts.append(f"FAIL: {g.failure}")
        else:
            parts.append(format_rounds(g) if g.how else format_table(g.results))
        parts.append("")
    failed = [g.point for g in gates if g.verdict == FAIL]
    open_ = [g.point for g in gates if g.verdict == NOT_DECIDED]
    parts.append(
        f"{len(gates) - len(failed) - len(open_)} of {len(gates)} points passed"
        + (f"; failed: {', '.join(failed)}" if failed else "")
        + (f"; not decided: {', '.join(open_)}" if open_ else "")
    )
    return "\n".join(parts)
