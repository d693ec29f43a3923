"""The stress section's diagnoses: each run's verdicts with their evidence and figures, in the write-up's words.

Rows read like the reference write-up ("short request during a 54K-token prefill, first token (p95)") with the
summary.json metric key beside them for scripts; verdicts come from summary.json's `diagnoses` as the run wrote
them (recomputable from the run's files by stress/summary.py).
"""

from __future__ import annotations

from typing import Any

from evalkit.report.runs import LabelledRun
from evalkit.report.tables import Table, not_exercised_text
from evalkit_stress.verdicts import CANT, NOT_EXERCISED, VerdictReading

# (words, metric key, statistic); `{long}` is the run's long prompt length.
FIGURES = (
    ("{long} prefill alone, first token (p50)", "long_prefill_s", "p50"),
    ("{long} prefill with short requests inserted, first token (p50)", "long_prefill_with_inserts_s", "p50"),
    ("short request during a {long} prefill, first token (p95)", "short_insert_ttft_s", "p95"),
    ("two short requests during a {long} prefill, first token (p95)", "double_insert_ttft_s", "p95"),
    ("next request after cancelling a long one, first token (max)", "post_cancel_ttft_s", "max"),
    ("short request alone, first token (p50)", "short_alone_ttft_s", "p50"),
    ("two generations at once, combined tok/s (p50)", "concurrent_combined_tok_s", "p50"),
    ("one generation alone, tok/s (p50)", "gen_alone_tok_s", "p50"),
    ("streams served at once, effective concurrency (p50)", "effective_concurrency", "p50"),
)
VERDICTS = (
    ("cancel aborts the prefill", "cancel_aborts"),
    ("short request waits out the long prefill (head-of-line blocking)", "head_of_line_blocking"),
    ("long request's own prefill hurt by inserts", "long_hurt_by_inserts"),
    ("two generations served together", "concurrency"),
)


def _long_words(runs: list[LabelledRun]) -> str:
    tokens = {(r.summary.get("options") or {}).get("long_tokens") for r in runs} - {None}
    return f"{tokens.pop() / 1000:g}K-token" if len(tokens) == 1 else "long"


def _num(v: Any) -> str:
    return "–" if v is None else f"{v:.3g}" if isinstance(v, float) else str(v)


def _verdict_cell(d: VerdictReading | None) -> str:
    if d is None:
        return "–"
    parts = [d.verdict]
    if d.granularity not in (None, CANT):
        parts.append(str(d.granularity))
    if d.cause and d.cause != CANT:
        parts.append(f"waited for {d.cause}")
    if d.next_delay_cause:
        parts.append(f"next request waited for {d.next_delay_cause}")
    if d.ratio_p50 is not None:
        parts.append(f"own prefill {d.ratio_p50:.3f}x alone")
    if d.stop_after_cancel_s_max is not None:
        parts.append(f"stopped within {d.stop_after_cancel_s_max:.3g} s")
    text = "; ".join(parts) + f" (evidence: {d.evidence})"
    if d.verdict == NOT_EXERCISED and d.why:
        text += f": {d.why}"
    if d.verdict in (CANT, NOT_EXERCISED) and d.would_tell:
        text += f"; would tell: {d.would_tell}"
    return text.replace("|", "/")


def diagnosis_tables(runs: list[LabelledRun]) -> list[Table]:
    """The figures in the write-up's words, then each run's verdicts with their evidence."""
    cols = [r.label for r in runs]
    long = _long_words(runs)
    rows = []
    for words, key, stat in FIGURES:
        vals = [((r.summary.get("metrics") or {}).get(key) or {}).get(stat) for r in runs]
        # A situation that never happened gets a row that says so, never a figure (stress/exercised.py).
        missing = [not_exercised_text(r.summary, key) for r in runs]
        failed = [(r.summary.get("failed_by_metric") or {}).get(key) for r in runs]
        if any(v is not None for v in vals) or any(missing) or any(failed):
            cells = [
                _num(v)
                if v is not None
                else "– (" + "; ".join(([m] if m else []) + ([f"{f} failed"] if f else [])) + ")"
                if (m or f)
                else "–"
                for v, m, f in zip(vals, missing, failed)
            ]
            rows.append((f"{words.format(long=long)} `{key}.{stat}`", cells))
    figures = Table(
        "stress_figures",
        "What a user waits for (stress)",
        cols,
        rows,
        ["Seconds unless named; the key after each row is the metric in summary.json."],
        row_header="",
    )
    vrows = []
    for words, key in VERDICTS:
        cells = [_verdict_cell(VerdictReading.from_json((r.summary.get("diagnoses") or {}).get(key))) for r in runs]
        if any(c != "–" for c in cells):
            vrows.append((f"{words} `diagnoses.{key}`", cells))
    verdicts = Table(
        "stress_diagnoses",
        "Diagnoses (stress)",
        cols,
        vrows,
        [
            "Each verdict is yes / no / can't tell and names its evidence: the server's per-request timings, "
            "its log (--server-log), its /metrics, or the client alone."
        ],
        row_header="",
    )
    return [figures, verdicts] if vrows else [figures]
