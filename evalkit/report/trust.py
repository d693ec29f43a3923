"""Trust marks: what a run says about its own figures (its client distorted it, the client was the bottleneck, the
client's error budget exceeded a millisecond), read from its summary.json, and how a table shows them.

A figure the run itself flags gets `⚠` where a beyond-noise mark would stand: a change measured by a distorted
client is not called beyond noise, however large. The error budget is a bound in seconds on first-token stamps, so it
is weighed against each rate it can touch: a decode rate over a first→last window W moves by at most budget / W, and
a rate's mark stands when the change passes the noise floor even with every stamp off by the whole budget
(`budget_cannot_explain`). Rates over send→done never use a first-token stamp, so the budget leaves them alone.
Summaries are read defensively (any evalkit version; a key added by a newer client, such as the client's error
budget, is used when present and ignored when absent).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evalkit.client.lag import ERROR_BUDGET_LIMIT_S
from evalkit.report import noise
from evalkit.report.formatting import num
from evalkit.report.runs import LabelledRun
from evalkit.runs.machine_probe import machine_changed
from evalkit.runs.schemas import BenchPrompt
from evalkit.runs.summary_parts import ClientTiming

MARK = "⚠"
SHORT = {
    "client_distorted": "the client distorted this run",
    "client_bound": "the client was the bottleneck",
    "client_error_budget": "the client's error budget exceeds 1 ms",
}


@dataclass(frozen=True)
class TrustFlag:
    """One reason not to trust a run's figures: an identifier for scripts and the sentence for a reader."""

    key: str
    words: str

    @property
    def short(self) -> str:
        """A few words for beside a figure; the sentence stands once under the summary."""
        return SHORT.get(self.key, self.key)


def _ms(v: Any) -> str:
    return f"{num(v * 1000, 2)} ms" if isinstance(v, (int, float)) else "–"


def _budget(run: LabelledRun) -> tuple[float | None, int | None]:
    """(the client's error budget in s, first tokens that may have shared a stamp), from the summary's `client`
    block (`error_budget_s`: p99 over requests of how far a first token's stamp may lie after its arrival;
    `first_tokens_maybe_shared_stamp`); (None, None) from a client that did not record them."""
    client = run.record.client_timing()
    if client is None:
        return None, None
    return client.error_budget_s, client.first_tokens_maybe_shared_stamp


def run_flags(run: LabelledRun) -> list[TrustFlag]:
    """Every reason the run itself gives not to trust its figures (empty when it gives none)."""
    client = run.record.client_timing() or ClientTiming()
    out = []
    if client.distorted:
        reasons = client.distortion_reasons
        out.append(
            TrustFlag(
                "client_distorted",
                "the client distorted this run (it sent or cancelled requests late, or its stamps may be late)"
                + (": " + "; ".join(reasons) if reasons else ""),
            )
        )
    if client.client_bound or run.summary.get("client_bound"):
        lag = client.read_lag_s.p95 if client.read_lag_s is not None else None
        gap = client.token_gap_p50_s
        figures = (
            f": it read answers {_ms(lag)} late (p95), longer than the server's {_ms(gap)} between tokens"
            if lag is not None and gap is not None
            else ""
        )
        out.append(TrustFlag("client_bound", "the client, not the server, was the bottleneck" + figures))
    budget, shared = _budget(run)
    if budget is not None and budget > ERROR_BUDGET_LIMIT_S:
        extra = f" ({shared} first token(s) read together with later bytes)" if shared else ""
        out.append(
            TrustFlag(
                "client_error_budget",
                f"the client's error budget exceeds 1 ms: a first token's arrival stamp may lie up to "
                f"{_ms(budget)} after its true arrival (p99){extra}",
            )
        )
    return out


def rate_window_s(entry: BenchPrompt) -> float | None:
    """The shortest first→last-token window (s) behind a bench prompt's decode rates: (completion tokens - 1) / rate
    of each run; None when the entry does not say (then the budget is not weighed, and its flag stands)."""
    rates = entry.runs
    windows = [(t - 1) / r for t, r in zip(entry.completion_tokens, rates) if t is not None and r > 0 and t > 1]
    return min(windows) if windows and len(windows) == len(rates) else None


def budget_cannot_explain(
    verdict: noise.NoiseVerdict | None,
    entries: tuple[BenchPrompt, BenchPrompt],
    runs: tuple[LabelledRun, LabelledRun],
    noise_floor: float = noise.DEFAULT_NOISE_FLOOR,
) -> bool:
    """Whether a bench prompt's beyond-noise decode-rate change (`tok_s` of the two runs' prompt entries) survives
    the worst the two runs' error budgets can do: a first-token stamp late by up to the budget shortens a window W
    (`rate_window_s`) and inflates its rate by up to budget / W, so the better run's rate is taken that much lower.
    True for a verdict that calls no change, a run with no budget, or a change that still passes the floor; False
    when a window is unknown."""
    if verdict is None or not verdict.beyond:
        return True
    errors = []
    for run, entry in zip(runs, entries):
        budget, window = _budget(run)[0], rate_window_s(entry)
        if budget is None or budget <= ERROR_BUDGET_LIMIT_S:
            errors.append(0.0)
        elif window is None or window <= 0:
            return False
        else:
            errors.append(min(1.0, budget / window))
    a, b = (e.tok_s for e in entries)
    if a is None or b is None or a <= 0 or b <= 0:
        return False
    if b >= a:
        return b * (1 - errors[1]) / a - 1 >= noise_floor
    return 1 - b / (a * (1 - errors[0])) >= noise_floor


def flag_text(run: LabelledRun) -> str | None:
    """The run's flags as one sentence, or None."""
    flags = run_flags(run)
    return f"{run.label} ({run.kind}): " + "; ".join(f.words for f in flags) if flags else None


def figure_flags(run: LabelledRun, budget_weighed: bool = False) -> list[TrustFlag]:
    """The run's flags that count against one figure: all of them, or without the error budget's when the figure
    was weighed against the budgets and they cannot explain it (`budget_cannot_explain`) or cannot touch it."""
    flags = run_flags(run)
    return [f for f in flags if f.key != "client_error_budget"] if budget_weighed else flags


def suppress(
    runs: Sequence[LabelledRun],
    verdicts: Sequence[noise.NoiseVerdict | None],
    budget_weighed: Sequence[bool] | None = None,
) -> list[noise.NoiseVerdict | None]:
    """The verdicts with `⚠` in place of any mark whose pair (the run or the first column) flags itself.
    `budget_weighed[i]`: column i's figure was weighed against both runs' error budgets and the budgets cannot
    explain its mark (or cannot touch it), so only the other flags count there."""
    out: list[noise.NoiseVerdict | None] = []
    for i, (r, v) in enumerate(zip(runs, verdicts)):
        weighed = bool(budget_weighed[i]) if budget_weighed is not None and i < len(budget_weighed) else False
        moved = machine_changed(runs[0].run.manifest, r.run.manifest) if i else None
        if v is not None and (figure_flags(runs[0], weighed) or figure_flags(r, weighed)):
            out.append(noise.NoiseVerdict(MARK, "trust", "a run of the pair flags its own figures"))
        elif v is not None and moved is not None:
            out.append(noise.NoiseVerdict(MARK, "machine", f"can't tell: {moved}"))
        else:
            out.append(v)
    return out


def machine_notes(runs: Sequence[LabelledRun]) -> list[str]:
    """One note per run whose measuring machine differs from the first column's (evalkit.runs.machine_probe)."""
    out = []
    for r in runs[1:]:
        why = machine_changed(runs[0].run.manifest, r.run.manifest)
        if why is not None:
            out.append(f"{MARK} {runs[0].label} against {r.label} ({r.kind}): can't tell: {why}.")
    return out


def notes(runs: Sequence[LabelledRun]) -> list[str]:
    """One note per flagged run, for under a table."""
    out = [t for t in (flag_text(r) for r in runs) if t] + machine_notes(runs)
    if out:
        out.append(f"{MARK}: a run of the pair flags its own figures, so no change is called beyond noise.")
    return [f"{MARK} {t}" if not t.startswith(MARK) else t for t in out]
