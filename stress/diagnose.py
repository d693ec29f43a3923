"""Diagnoses from the measurements: what the numbers mean about the server's scheduler.

Thresholds are deliberately coarse (a factor of 2 or 3): the failures this looks for are the write-up's, where a
short request waited 39.5 s instead of 1.1 s and a cancelled prefill ran on for 10 s.
"""

from __future__ import annotations

import statistics
from typing import Any

from evalkit_stress.metrics import Line, cancel_samples, insert_wait_fractions

HOL_FRACTION = 0.5  # an inserted short that waits more than half the remaining prefill is blocked behind it
SLOWER_THAN_ALONE = 3.0  # ... and much slower than the same kind of request alone
HURT_RATIO = 1.10  # a long prefill 10% slower with inserts than alone
LOW_SPEEDUP = 1.5  # two streams served together that deliver less than 1.5x one stream gain little from batching


def _p50(metrics: dict[str, Any], name: str) -> float | None:
    return (metrics.get(name) or {}).get("p50")


def diagnose(metrics: dict[str, Any], lines: list[Line]) -> dict[str, Any]:
    """`effective_concurrency`, `head_of_line_blocking`, `cancel_aborts`, `long_hurt_by_inserts`, each with why."""
    out: dict[str, Any] = {}
    alone = _p50(metrics, "short_alone_ttft_s")

    eff = _p50(metrics, "effective_concurrency")
    out["effective_concurrency"] = None if eff is None else max(1, round(eff))
    out["effective_concurrency_raw"] = eff
    out["concurrency_speedup"] = _p50(metrics, "concurrency_speedup")

    fractions = insert_wait_fractions(lines)
    ins = _p50(metrics, "short_insert_ttft_s")
    if fractions and ins is not None:
        frac = statistics.median(fractions)
        blocked = frac > HOL_FRACTION and (alone is None or ins > SLOWER_THAN_ALONE * alone)
        out["head_of_line_blocking"] = {"detected": blocked, "wait_fraction_p50": frac}
    else:
        out["head_of_line_blocking"] = {"detected": None, "wait_fraction_p50": None}

    samples = [s for s in cancel_samples(lines) if not s["cancelled_after_first_token"]]
    prefill = _p50(metrics, "long_prefill_s")
    if samples and prefill is not None:
        left = statistics.median(max(1e-9, prefill - s["cancel_after_s"]) for s in samples)
        nxt = statistics.median(s["next_ttft_s"] for s in samples)
        # A cancel that aborts serves the next request in about one prefill chunk; one that does not makes it
        # wait for the rest of the cancelled prompt.
        not_aborting = nxt > HOL_FRACTION * left and (alone is None or nxt > SLOWER_THAN_ALONE * alone)
        out["cancel_aborts"] = {
            "aborts": not not_aborting,
            "next_ttft_p50": nxt,
            "prefill_left_at_cancel_p50": left,
            "judged_cycles": len(samples),
        }
    else:
        out["cancel_aborts"] = {"aborts": None, "judged_cycles": 0,
                                "why": "no cancel landed inside a prefill (cancelled after the first token)"}

    with_ins = _p50(metrics, "long_prefill_with_inserts_s")
    if with_ins is not None and prefill:
        ratio = with_ins / prefill
        out["long_hurt_by_inserts"] = {"detected": ratio > HURT_RATIO, "ratio_p50": ratio}
    else:
        out["long_hurt_by_inserts"] = {"detected": None, "ratio_p50": None}
    return out


def diagnosis_lines(d: dict[str, Any], metrics: dict[str, Any]) -> list[str]:
    """One plain sentence per diagnosis, for the terminal."""
    lines = []
    eff = d.get("effective_concurrency")
    if eff is not None:
        speedup = d.get("concurrency_speedup")
        note = " (the two generations took turns)" if eff == 1 else ""
        if eff >= 2 and speedup is not None and speedup < LOW_SPEEDUP:
            note = (f" (served together, but combined throughput only {speedup:.2f}x one stream alone: "
                    "the engine is compute-bound or time-slices)")
        lines.append(f"effective concurrency: {eff}{note}")
    hol = d["head_of_line_blocking"]
    if hol["detected"] is not None:
        p95 = metrics["short_insert_ttft_s"]["p95"]
        verdict = "head-of-line blocking" if hol["detected"] else "no head-of-line blocking"
        lines.append(f"{verdict}: an inserted short request waited {hol['wait_fraction_p50']:.0%} of the remaining "
                     f"long prefill (short-insert TTFT p95 {p95:.3g} s)")
    ca = d["cancel_aborts"]
    if ca["aborts"] is not None:
        verdict = "cancel aborts the prefill" if ca["aborts"] else "cancel does NOT abort the prefill"
        lines.append(f"{verdict}: next request's TTFT {ca['next_ttft_p50']:.3g} s with "
                     f"{ca['prefill_left_at_cancel_p50']:.3g} s of prefill left (p50)")
    else:
        lines.append("cancel: not judged (" + ca.get("why", "no samples") + ")")
    hurt = d["long_hurt_by_inserts"]
    if hurt["detected"] is not None:
        verdict = "long request hurt by inserts" if hurt["detected"] else "long request not hurt by inserts"
        lines.append(f"{verdict}: prefill {hurt['ratio_p50']:.3f}x its time alone (p50)")
    return lines
