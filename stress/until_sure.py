"""`evalkit stress --until-sure`: after each cycle, is every verdict decided and every key figure sure enough?

The stopping rule (docs/until-sure.md says what it promises):
- nothing is decided before `min_cycles` cycles (3: a bootstrap of fewer samples cannot tell a change from luck);
- a **figure** (short-insert TTFT p95, post-cancel TTFT max, the two generations' combined tok/s, the long prefill
  p95; each with its headline statistic from `metric_registry`) is sure when its 95% interval over the samples so far
  lies within ±`margin` of its estimate: a median's is distribution-free (order statistics, 6 samples at least), a
  tail statistic's (p95, max) the percentile bootstrap's, which says "stable to about the margin", not more;
- against a **baseline** run, a figure is decided instead when its comparison is: the interval of the ratio
  (this run / baseline) excludes 1 by more than the noise floor (beyond noise), or lies inside 1 ± `margin`
  (equivalent);
- a **verdict** read from samples (head-of-line blocking, cancel aborts the prefill) is decided when at least
  `min_cycles` samples settled (yes or no) and the 95% Wilson interval of the majority's share lies above one half
  (4 of 4 agreeing does, 3 of 3 not yet; one sample a cycle, the cancel's, decides after 4); effective concurrency when
  every cycle's pair rounds to the same number of streams; "long request hurt by inserts" when the bootstrap interval
  of the prefill ratio lies on one side of the diagnosis' threshold;
- a verdict whose every sample is "can't tell" after `min_cycles` cycles cannot be decided by more of the same
  cycles (the evidence is missing, not the count): it does not hold the run, and the summary says so.
The schedule is the `--max-cycles` one, so a run that stops early is a prefix of the full run (same seed, same
requests); every check is seeded and reads the run's files alone, so reading the run again gives the same decision.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, NotRequired, TypedDict

from evalkit.comparison import LEVEL, Comparison, compare_samples, holm, look_level, shift_interval
from evalkit.runs.rundir import Line
from evalkit.stats import bootstrap_ci, bootstrap_ratio_ci, headline, median, median_interval, wilson_interval
from evalkit_stress import metric_registry
from evalkit_stress.metric_registry import CycleMetric
from evalkit_stress.metrics import StressMetrics, cycle_samples, cycle_values, metric_samples
from evalkit_stress.resume import read_counted
from evalkit_stress.verdict_json import CancelVerdictJson, DiagnosisJson, HeadOfLineVerdictJson
from evalkit_stress.verdicts import CANT, NO, YES

FILE = "until_sure.jsonl"  # one line per completed cycle: the decision after it
MIN_CYCLES = 3
DEFAULT_MARGIN = 0.10
MEDIAN_MIN_SAMPLES = 6  # evalkit.stats.median_interval has no 95% interval from fewer
NOISE_FLOOR = 0.02  # a comparison smaller than this is never called beyond noise (the report's floor)
FIGURES = ("short_insert_ttft_s", "post_cancel_ttft_s", "concurrent_combined_tok_s", "long_prefill_s")
SAMPLED_VERDICTS: Final = ("head_of_line_blocking", "cancel_aborts")


class SureRuleJson(TypedDict):
    """The rule as the summary's `until_sure` records it."""

    max_cycles: int
    margin: float
    min_cycles: int


class CheckJson(TypedDict):
    """One check as until_sure.jsonl and the summary record it."""

    name: str
    what: str
    decided: bool
    value: float | str | None
    n: int
    why: str
    interval: list[float] | None
    holds: bool
    level: float | None


class DecisionJson(TypedDict):
    """A decision as until_sure.jsonl and the summary record it."""

    cycles: int
    decided: bool
    undecided: list[str]
    checks: list[CheckJson]


class UntilSureJson(SureRuleJson, DecisionJson):
    """summary.json's `until_sure`: the rule, its baseline run if any, whether the run stopped early, the decision."""

    baseline: NotRequired[str]
    stopped_early: bool


@dataclass(frozen=True)
class SureRule:
    """When a run may stop: its margin, the fewest cycles, the most."""

    max_cycles: int
    margin: float = DEFAULT_MARGIN
    min_cycles: int = MIN_CYCLES

    def to_json(self) -> SureRuleJson:
        """As the summary records it."""
        return {"max_cycles": self.max_cycles, "margin": self.margin, "min_cycles": self.min_cycles}


@dataclass(frozen=True)
class Check:
    """One figure, comparison or verdict after the cycles so far: its value, interval, samples, and whether it is
    decided. `holds` is False for what more cycles of the same evidence cannot decide."""

    name: str
    what: str  # figure | comparison | verdict
    decided: bool
    value: float | str | None
    n: int
    why: str
    interval: tuple[float, float] | None = None
    holds: bool = True
    level: float | None = None  # a comparison's: the level its call was made at (its look's and Holm's share)

    @property
    def blocking(self) -> bool:
        """Whether this check keeps the run going."""
        return self.holds and not self.decided

    def to_json(self) -> CheckJson:
        """As until_sure.jsonl and the summary record it."""
        return {
            "name": self.name,
            "what": self.what,
            "decided": self.decided,
            "value": self.value,
            "n": self.n,
            "why": self.why,
            "interval": list(self.interval) if self.interval is not None else None,
            "holds": self.holds,
            "level": self.level,
        }


@dataclass(frozen=True)
class Decision:
    """The decision after `cycles` completed cycles."""

    cycles: int
    checks: tuple[Check, ...] = field(default_factory=tuple)
    early: bool = False  # fewer than the rule's min_cycles: nothing is decided yet

    @property
    def decided(self) -> bool:
        """Every check decided (or undecidable from this evidence), after at least the fewest cycles."""
        return not self.early and not any(c.blocking for c in self.checks)

    def undecided(self) -> list[Check]:
        """The checks that keep the run going."""
        return [c for c in self.checks if c.blocking]

    def to_json(self) -> DecisionJson:
        """As until_sure.jsonl and the summary record it."""
        return {
            "cycles": self.cycles,
            "decided": self.decided,
            "undecided": [c.name for c in self.undecided()],
            "checks": [c.to_json() for c in self.checks],
        }

    def line(self) -> str:
        """One line for standard error after a cycle."""
        if self.early:
            return f"until sure: {self.cycles} cycle(s), nothing decided before {MIN_CYCLES}"
        if self.decided:
            cant = [c for c in self.checks if not c.holds and not c.decided]
            tail = "; ".join(f"{c.name} ({c.why})" for c in cant)
            return f"until sure: decided after {self.cycles} cycles" + (f"; can't tell: {tail}" if cant else "")
        return f"until sure: after {self.cycles} cycles still undecided: " + "; ".join(
            f"{c.name} ({c.why})" for c in self.undecided()
        )


def wilson_low(k: int, n: int) -> float:
    """Lower end of the 95% Wilson score interval of k successes in n (0 when n is 0)."""
    return wilson_interval(k, n)[0]


def _stat_of(metric: str) -> str:
    spec = metric_registry.get(metric)
    return spec.headline if spec is not None else "p50"


def figure_check(metric: str, xs: Sequence[float], margin: float) -> Check:
    """A figure is sure when its headline statistic's interval lies within ±margin of it: a median's the
    distribution-free order-statistic interval (6 samples at least), a tail statistic's (p95, max) the bootstrap's,
    which no distribution-free interval from so few samples can replace: "stable to ±margin", not a 95% promise."""
    stat = _stat_of(metric)
    name = f"{metric} {stat}"
    est = headline(xs, stat)
    ci = median_interval(xs) if stat == "p50" else bootstrap_ci(xs, stat)
    if est is None or ci is None:
        need = f" (a median's distribution-free interval needs {MEDIAN_MIN_SAMPLES})" if stat == "p50" else ""
        return Check(name, "figure", False, est, len(xs), f"{len(xs)} sample(s){need}")
    half = (ci[1] - ci[0]) / 2
    rel = half / abs(est) if est else math.inf
    ok = rel <= margin
    how = "" if stat == "p50" else ", bootstrap: stable, no 95% promise"
    return Check(name, "figure", ok, est, len(xs), f"±{rel:.1%} of {est:.4g} (margin ±{margin:.0%}{how})", ci)


def comparison_check(
    metric: str,
    xs: Sequence[float],
    base: Sequence[float],
    margin: float,
    level: float = LEVEL,
    machine: str | None = None,
    so_far: str | None = None,
) -> Check:
    """One figure against the baseline by the one comparison rule (evalkit.comparison) at `level`: decided beyond
    noise (the rank test rejects and the median moved past the floor), or equivalent when the shift interval
    (Hodges-Lehmann, at the same level) lies inside 1 ± margin; with `machine` (why the two measuring machines
    differ) never called, and more cycles of the same will not tell; with `so_far` (why this run's client looks
    distorted on its cycles so far) not called yet, but held open: the client check rests on this run's figures,
    which more cycles change (a latency p50 read from 5 cycles can sit well below the 18-cycle one)."""
    c = compare_samples(base, xs, metric_registry.higher_is_better(metric), level, NOISE_FLOOR)
    return _judged(metric, xs, base, c, margin, machine, so_far)


def _judged(
    metric: str,
    xs: Sequence[float],
    base: Sequence[float],
    c: Comparison,
    margin: float,
    machine: str | None,
    so_far: str | None,
) -> Check:
    """`comparison_check`'s reading of a comparison already made (at its level, `c.level`)."""
    name = f"{metric} {_stat_of(metric)} vs baseline"
    level, ratio = c.level, c.ratio
    r = f"x{ratio:.3g}" if ratio is not None else "x?"
    if machine is not None:
        return Check(name, "comparison", False, ratio, len(xs), f"{r}, can't tell: {machine}", holds=False, level=level)
    if so_far is not None:
        return Check(name, "comparison", False, ratio, len(xs), f"{r}, can't tell yet: {so_far}", level=level)
    if not base or not xs or ratio is None:
        return Check(name, "comparison", False, None, len(xs), f"{len(xs)} and {len(base)} sample(s)")
    at = f"rank test p={c.p:.2g} at level {level:.2g}" if c.p is not None else "no test"
    ci = shift_interval(base, xs, level) if level > 0 else None
    if c.beyond:
        return Check(name, "comparison", True, ratio, len(xs), f"{r}, beyond noise ({at})", ci, level=level)
    if ci is not None and ci[0] >= 1 - margin and ci[1] <= 1 + margin:
        why = f"{r}, within ±{margin:.0%} [{ci[0]:.3g}, {ci[1]:.3g}] ({at})"
        return Check(name, "comparison", True, ratio, len(xs), why, ci, level=level)
    span = f" [{ci[0]:.3g}, {ci[1]:.3g}]" if ci is not None else ""
    why = f"{r}{span}, not yet beyond noise nor within ±{margin:.0%} ({at})"
    return Check(name, "comparison", False, ratio, len(xs), why, ci, level=level)


def comparison_checks(
    lines: list[Line],
    baseline: list[Line],
    cycles: int,
    rule: SureRule,
    machine: str | None = None,
    so_far: str | None = None,
) -> list[Check]:
    """Every figure against the baseline (`comparison_check`) at its share of the level: the level is spent over
    the looks from `min_cycles` to `max_cycles` (`evalkit.comparison.look_level`) and the figures of a look are one
    Holm family, so an identical build is called changed at most 5% of the time over the whole run."""
    look = look_level(LEVEL, cycles, rule.max_cycles, first_look=rule.min_cycles)
    figures = [(m, xs, cycle_values(baseline, m)) for m in FIGURES if (xs := cycle_values(lines, m))]
    higher = [metric_registry.higher_is_better(m) for m, _, _ in figures]
    tested = holm(
        [compare_samples(b, x, h, look, NOISE_FLOOR) for (_, x, b), h in zip(figures, higher)],
        higher,
        look,
        NOISE_FLOOR,
    )
    return [_judged(m, x, b, c, rule.margin, machine, so_far) for (m, x, b), c in zip(figures, tested, strict=True)]


def sampled_verdict_check(
    name: str, verdict: HeadOfLineVerdictJson | CancelVerdictJson | None, min_n: int
) -> Check | None:
    """A verdict read from samples: decided when enough settled and the majority's share is sure to be one."""
    if not verdict:
        return None
    samples = verdict.get("samples") or []
    if not samples:
        return None
    settled = [s["verdict"] for s in samples if s.get("verdict") in (YES, NO)]
    cant = [s for s in samples if s.get("verdict") == CANT]
    if not settled:
        if len(cant) >= min_n:
            why = "every sample can't tell: more cycles of the same evidence will not decide it"
            tell = next((s.get("would_tell") for s in cant if s.get("would_tell")), None)
            return Check(name, "verdict", False, CANT, 0, why + (f"; {tell} would" if tell else ""), holds=False)
        return Check(name, "verdict", False, CANT, 0, f"{len(samples)} sample(s), none settled")
    yes = settled.count(YES)
    major, k = (YES, yes) if yes >= len(settled) - yes else (NO, len(settled) - yes)
    low = wilson_low(k, len(settled))
    ok = len(settled) >= min_n and low > 0.5
    return Check(name, "verdict", ok, major, len(settled), f"{k} of {len(settled)} settled samples say {major}")


def concurrency_check(xs: Sequence[float], min_n: int) -> Check | None:
    """Effective concurrency: decided when every cycle's pair rounds to the same number of streams."""
    if not xs:
        return None
    rounded = {round(x) for x in xs}
    value = median(xs)
    ok = len(xs) >= min_n and len(rounded) == 1
    why = f"{len(xs)} cycle(s) read {sorted(rounded)} streams"
    return Check("effective_concurrency", "verdict", ok, round(value) if value is not None else None, len(xs), why)


def hurt_check(with_inserts: Sequence[float], alone: Sequence[float], threshold: float) -> Check | None:
    """Long request hurt by inserts: the prefill ratio's interval on one side of the diagnosis' threshold."""
    ci = bootstrap_ratio_ci(with_inserts, alone)
    if ci is None:
        return None
    lo, hi = ci
    a, b = median(with_inserts), median(alone)
    ratio = a / b if a is not None and b else None
    if ratio is None:
        return None
    side = YES if lo > threshold else NO if hi < threshold else CANT
    return Check(
        "long_hurt_by_inserts",
        "verdict",
        side != CANT,
        side,
        len(with_inserts),
        f"prefill ratio {ratio:.3g} [{lo:.3g}, {hi:.3g}] against {threshold}",
        ci,
    )


def decide(
    lines: list[Line],
    diagnoses: DiagnosisJson | None,
    cycles: int,
    rule: SureRule,
    baseline: list[Line] | None = None,
    machine: str | None = None,
    so_far: str | None = None,
) -> Decision:
    """The decision after `cycles` completed cycles, from the counted request lines and the run's diagnoses;
    `machine`: why this run's measuring machine cannot be taken as the baseline's (then no comparison is called);
    `so_far`: why this run's client looks distorted on its cycles so far (no comparison called yet; they stay open)."""
    from evalkit_stress.judge_long_hurt import HURT_RATIO

    checks: list[Check] = []
    if baseline is not None:
        checks += comparison_checks(lines, baseline, cycles, rule, machine, so_far)
    else:
        for metric in FIGURES:
            xs = metric_samples(lines, metric)
            if xs:  # else the scenario file has no such situation, or it never happened: nothing to be sure of
                checks.append(figure_check(metric, xs, rule.margin))
    for name in SAMPLED_VERDICTS:
        c = sampled_verdict_check(name, diagnoses[name], rule.min_cycles) if diagnoses else None
        if c is not None:
            checks.append(c)
    spec = metric_registry.get("effective_concurrency")
    ok = [x for x in lines if x.get("status", "ok") == "ok"]
    conc = concurrency_check(cycle_samples(ok, spec) if isinstance(spec, CycleMetric) else [], rule.min_cycles)
    if conc is not None:
        checks.append(conc)
    hurt = hurt_check(
        metric_samples(lines, "long_prefill_with_inserts_s"), metric_samples(lines, "long_prefill_s"), HURT_RATIO
    )
    if hurt is not None:
        checks.append(hurt)
    return Decision(cycles, tuple(checks), early=cycles < rule.min_cycles)


def counted_lines(run_path: Path, up_to: int | None = None) -> tuple[list[Line], int]:
    """A run directory's request lines of its completed cycles (as its summary counts them), and how many; with
    `up_to`, those of its first `up_to` cycles only (what an --until-sure run would have seen then)."""
    split, completed = read_counted(run_path, up_to)
    return split.counted, len(completed)


def decide_run(
    run_path: Path,
    rule: SureRule,
    baseline: list[Line] | None = None,
    up_to: int | None = None,
    baseline_path: Path | None = None,
    weigh_machine: bool = True,
) -> Decision:
    """The decision a run directory's files support now: its completed cycles, diagnosed as its summary will be
    (with `up_to`, after its first `up_to` cycles); with `baseline_path`, the two runs' measuring machines are
    weighed too (`machine_difference`; `weigh_machine=False` leaves them out, for measuring the rule alone)."""
    from evalkit.evidence.server_evidence import read_evidence
    from evalkit_stress.diagnose import diagnose
    from evalkit_stress.exercised import annotate, exercised
    from evalkit_stress.metrics import compute_metrics

    lines, cycles = counted_lines(run_path, up_to)
    metrics = compute_metrics(exercised(lines))
    diagnoses = diagnose(metrics, annotate(lines), read_evidence(run_path)).to_json()
    weigh = baseline is not None and weigh_machine
    machine, so_far = machine_difference(run_path, lines, metrics, baseline_path) if weigh else (None, None)
    return decide(lines, diagnoses, cycles, rule, baseline, machine, so_far)


def machine_difference(
    run_path: Path, lines: list[Line], metrics: StressMetrics, baseline_path: Path | None
) -> tuple[str | None, str | None]:
    """(why this run and its baseline were not measured on the same machine state, why this run's client looks
    distorted so far), each None when not. The first is final: the baseline's client distorted its run (its summary
    says so) or their calibration probes lie apart (evalkit.runs.machine_probe). The second is not: the same rule
    as the summary's, on the cycles so far and their `metrics`, whose thresholds (a tenth of the smallest latency
    p50) move as cycles come in: measured on the lent machine, 32 of 46 runs of a 5% slower decode stopped "can't
    tell" at cycles 4-5 this way, though their 18 cycles were not distorted and called the change."""
    from evalkit.runs.machine_probe import machine_changed
    from evalkit_stress.client_distortion import client_health

    health = client_health(lines, [], metrics)
    so_far = None
    if health.get("distorted"):
        so_far = "this run's client distorts it so far: " + "; ".join(health.get("distortion_reasons") or [])
    if baseline_path is None:
        return None, so_far
    summary, manifest = _read_json(baseline_path / "summary.json"), _read_json(baseline_path / "manifest.json")
    got = summary.get("client")
    client: dict[str, Any] = got if isinstance(got, dict) else {}
    if client.get("distorted"):
        return "the baseline's client distorted it: " + "; ".join(client.get("distortion_reasons") or []), so_far
    return machine_changed(manifest, _read_json(run_path / "manifest.json")), so_far


def _read_json(path: Path) -> dict[str, Any]:
    import json

    try:
        got = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return got if isinstance(got, dict) else {}


def until_sure_line(u: UntilSureJson) -> str:
    """The summary's `until_sure` block in one line: decided after how many cycles, or what was still undecided."""
    n, most = u.get("cycles"), u.get("max_cycles")
    if u.get("decided"):
        cant = [c for c in u.get("checks") or [] if c.get("holds") is False and not c.get("decided")]
        tail = "; ".join(f"{c.get('name')} ({c.get('why')})" for c in cant)
        head = f"until sure: decided after {n} of at most {most} cycles (margin ±{u.get('margin', 0):.0%})"
        return head + (f"; can't tell: {tail}" if cant else "")
    why = {c["name"]: c["why"] for c in u.get("checks") or []}
    left = "; ".join(f"{name} ({why.get(name, '')})" for name in u.get("undecided") or [])
    return f"until sure: still undecided after {n} of at most {most} cycles: {left}"
