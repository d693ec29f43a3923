"""The concurrency verdict: two streams served together or in turns, from measured figures only."""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalkit_stress.verdicts import CANT, NO, YES, ConcurrencyFigures, ConcurrencyVerdict

if TYPE_CHECKING:
    from evalkit_stress.metrics import StressMetrics

TOGETHER, TOOK_TURNS = 1.7, 1.3  # effective concurrency of two streams: served together / took turns


# -- concurrency --------------------------------------------------------------------------------------------------
def judge_concurrency(metrics: StressMetrics) -> ConcurrencyVerdict:
    """Measured figures only: each stream alone and together, the combined rate, effective concurrency."""

    def p50(name: str) -> float | None:
        return (metrics.get(name) or {}).get("p50")

    eff = p50("effective_concurrency")
    figures = ConcurrencyFigures(
        p50("gen_alone_tok_s"),
        p50("concurrent_stream_tok_s"),
        p50("concurrent_combined_tok_s"),
        eff,
        p50("concurrency_speedup"),
    )
    verdict = CANT if eff is None else YES if eff >= TOGETHER else NO if eff <= TOOK_TURNS else CANT
    return ConcurrencyVerdict(
        verdict,
        "client",
        figures,
        would_tell="two generations that both ran (and overlapped fully or not at all)" if verdict == CANT else None,
    )
