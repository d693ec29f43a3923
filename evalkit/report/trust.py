"""Trust marks: what a run says about its own figures (its client distorted it, the client was the bottleneck, the
client's error budget exceeded a millisecond), read from its summary.json, and how a table shows them.

A figure the run itself flags gets `⚠` where a beyond-noise mark would stand: a change measured by a distorted
client is not called beyond noise, however large. Summaries are read defensively (any evalkit version; a key added
by a newer client, such as the client's error budget, is used when present and ignored when absent).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evalkit.client.lag import ERROR_BUDGET_LIMIT_S
from evalkit.report import noise
from evalkit.report.runs import LabelledRun
from evalkit.report.words import num

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


def _d(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _ms(v: Any) -> str:
    return f"{num(v * 1000, 2)} ms" if isinstance(v, (int, float)) else "–"


def _budget(summary: dict[str, Any]) -> tuple[float | None, int | None]:
    """(the client's error budget in s, first tokens that may have shared a stamp), from the summary's `client`
    block (`error_budget_s`: p99 over requests of how far a first token's stamp may lie after its arrival;
    `first_tokens_maybe_shared_stamp`); (None, None) from a client that did not record them."""
    client = _d(summary.get("client"))
    budget = client.get("error_budget_s")
    shared = client.get("first_tokens_maybe_shared_stamp")
    return (
        float(budget) if isinstance(budget, (int, float)) and not isinstance(budget, bool) else None,
        shared if isinstance(shared, int) and not isinstance(shared, bool) else None,
    )


def run_flags(run: LabelledRun) -> list[TrustFlag]:
    """Every reason the run itself gives not to trust its figures (empty when it gives none)."""
    s = run.summary
    client = _d(s.get("client"))
    out = []
    if client.get("distorted"):
        reasons = [str(x) for x in client.get("distortion_reasons") or []]
        out.append(
            TrustFlag(
                "client_distorted",
                "the client distorted this run (it sent or cancelled requests late, or its stamps may be late)"
                + (": " + "; ".join(reasons) if reasons else ""),
            )
        )
    if client.get("client_bound") or s.get("client_bound"):
        lag = _d(client.get("read_lag_s")).get("p95")
        gap = client.get("token_gap_p50_s")
        figures = (
            f": it read answers {_ms(lag)} late (p95), longer than the server's {_ms(gap)} between tokens"
            if lag is not None and gap is not None
            else ""
        )
        out.append(TrustFlag("client_bound", "the client, not the server, was the bottleneck" + figures))
    budget, shared = _budget(s)
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


def flag_text(run: LabelledRun) -> str | None:
    """The run's flags as one sentence, or None."""
    flags = run_flags(run)
    return f"{run.label} ({run.kind}): " + "; ".join(f.words for f in flags) if flags else None


def suppress(
    runs: Sequence[LabelledRun], verdicts: Sequence[noise.NoiseVerdict | None]
) -> list[noise.NoiseVerdict | None]:
    """The verdicts with `⚠` in place of any mark whose pair (the run or the first column) flags itself."""
    base_flagged = bool(runs and run_flags(runs[0]))
    out: list[noise.NoiseVerdict | None] = []
    for r, v in zip(runs, verdicts):
        if v is not None and (base_flagged or run_flags(r)):
            out.append(noise.NoiseVerdict(MARK, "trust", "a run of the pair flags its own figures"))
        else:
            out.append(v)
    return out


def notes(runs: Sequence[LabelledRun]) -> list[str]:
    """One note per flagged run, for under a table."""
    out = [t for t in (flag_text(r) for r in runs) if t]
    if out:
        out.append(f"{MARK}: a run of the pair flags its own figures, so no change is called beyond noise.")
    return [f"{MARK} {t}" if not t.startswith(MARK) else t for t in out]
