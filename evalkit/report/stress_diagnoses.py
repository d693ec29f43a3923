"""The stress section's diagnoses: each run's verdicts with their evidence and figures, in the write-up's words.

Rows read like the reference write-up ("short request during a 54K-token prefill, first token (p95)") with the
summary.json metric key beside them for scripts; verdicts come from summary.json's `diagnoses` as the run wrote
them (recomputable from the run's files by stress/summary.py).
"""

from __future__ import annotations

from typing import Any

from evalkit.report import words as w
from evalkit.report.runs import LabelledRun
from evalkit.report.tables import Table, not_exercised_text
from evalkit_stress.verdicts import CANT, NOT_EXERCISED, YES, VerdictReading

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
    tokens: set[Any] = {(r.summary.get("options") or {}).get("long_tokens") for r in runs} - {None}
    return f"{tokens.pop() / 1000:g}K-token" if len(tokens) == 1 else "long"


def _num(v: Any) -> str:
    return w.num(v)


def _d(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _largest_part(parts: Any) -> tuple[str, float] | None:
    parts = {k: v for k, v in _d(parts).items() if isinstance(v, (int, float))}
    if not parts:
        return None
    k = max(parts, key=lambda x: parts[x])
    return w.cause(k), float(parts[k])


def _next_delay_words(raw: dict[str, Any]) -> str | None:
    """What held the request sent after each cancel, with its figures: the longest wait and its largest part."""
    delays = [_d(x.get("next_delay")) for x in raw.get("samples") or [] if isinstance(x, dict) and x.get("next_delay")]
    if not delays:
        cause = raw.get("next_delay_cause")
        return None if not cause or cause == CANT else f"the next request waited for {w.cause(cause)}"
    waits = [d for d in delays if isinstance(d.get("wait_s"), (int, float))]
    if waits:
        worst = max(waits, key=lambda d: d["wait_s"])
        part = _largest_part(worst.get("parts_s"))
        text = f"the next request waited up to {w.seconds(worst['wait_s'])} before the server started on it"
        if part:
            text += f", most of it ({w.seconds(part[1])}) for {part[0]}"
        return text
    ttfts = [d["ttft_s"] for d in delays if isinstance(d.get("ttft_s"), (int, float))]
    if ttfts:
        return f"the next request's first token came up to {w.seconds(max(ttfts))} after it was sent"
    return None


def _hol_words(raw: dict[str, Any]) -> list[str]:
    parts: list[str] = []
    blocked, judged = raw.get("blocked"), raw.get("judged")
    if isinstance(blocked, int) and isinstance(judged, int) and judged:
        parts.append(f"{blocked} of {judged} short requests waited out the long prefill")
    frac = raw.get("wait_fraction_p50")
    if isinstance(frac, (int, float)):
        parts.append(f"their wait was {frac:.0%} of the long prefill's remaining time (median)")
    samples = [_d(x.get("figures")) for x in raw.get("samples") or [] if isinstance(x, dict)]
    waits = [f for f in samples if isinstance(f.get("wait_before_start_s"), (int, float))]
    if waits:
        worst = max(waits, key=lambda f: f["wait_before_start_s"])
        text = f"the longest wait before the server started on one was {w.seconds(worst['wait_before_start_s'])}"
        part = _largest_part(worst.get("wait_parts_s"))
        if part:
            text += f", most of it ({w.seconds(part[1])}) for {part[0]}"
        parts.append(text)
    elif raw.get("cause") and raw.get("cause") != CANT:
        parts.append(f"they waited for {w.cause(raw['cause'])}")
    return parts


def _concurrency_words(raw: dict[str, Any], summary: dict[str, Any]) -> list[str]:
    f = _d(raw.get("figures"))
    if not f:
        f = {
            k: _d(_d(summary.get("metrics")).get(k)).get("p50")
            for k in ("concurrent_combined_tok_s", "gen_alone_tok_s")
        }
    out = []
    if f.get("concurrent_combined_tok_s") is not None and f.get("gen_alone_tok_s") is not None:
        out.append(
            f"two generations at once made {_num(f['concurrent_combined_tok_s'])} tok/s together, one alone "
            f"{_num(f['gen_alone_tok_s'])} tok/s"
        )
    eff = f.get("effective_concurrency", _d(summary.get("diagnoses")).get("effective_concurrency_raw"))
    if isinstance(eff, (int, float)):
        out.append(f"{eff:.2f} streams served at once (effective concurrency)")
    return out


def _verdict_cell(
    d: VerdictReading | None, raw: Any = None, summary: dict[str, Any] | None = None, key: str = ""
) -> str:
    """A verdict as a sentence with its figures and its evidence in words; never an identifier."""
    if d is None:
        return "–"
    raw, summary = _d(raw), summary or {}
    parts: list[str] = []
    if key == "cancel_aborts":
        if d.verdict not in (CANT, NOT_EXERCISED):
            stop = (
                f", within {w.seconds(d.stop_after_cancel_s_max)} of the cancel"
                if d.stop_after_cancel_s_max is not None
                else ""
            )
            gran = f" {d.granularity}" if d.granularity not in (None, CANT) else ""
            parts.append(
                "the engine stopped working on the cancelled request" + gran + stop
                if d.verdict == YES
                else "the engine kept working on the cancelled request"
                + (f" (it stopped {d.granularity})" if gran else "")
            )
        nxt = _next_delay_words(raw)
        if nxt:
            parts.append(nxt)
    elif key == "head_of_line_blocking":
        parts += _hol_words(raw)
    elif key == "long_hurt_by_inserts":
        f = _d(raw.get("figures"))
        if d.ratio_p50 is not None:
            text = f"its own prefill took {d.ratio_p50:.3f}× its time alone"
            if f.get("prefill_with_inserts_s_p50") is not None and f.get("prefill_alone_s_p50") is not None:
                text += (
                    f" ({w.seconds(f['prefill_with_inserts_s_p50'])} with inserts, "
                    f"{w.seconds(f['prefill_alone_s_p50'])} alone, medians)"
                )
            parts.append(text)
    elif key == "concurrency":
        parts += _concurrency_words(raw, summary)
    else:
        if d.cause and d.cause != CANT:
            parts.append(f"waited for {w.cause(d.cause)}")
    text = d.verdict + (": " + "; ".join(parts) if parts else "")
    text += f" (evidence: {w.evidence(d.evidence)})"
    if d.verdict == NOT_EXERCISED and d.why:
        text += f": {d.why}"
    if d.verdict == CANT and d.why:
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
        cells = []
        for r in runs:
            raw = (r.summary.get("diagnoses") or {}).get(key)
            cells.append(_verdict_cell(VerdictReading.from_json(raw), raw, r.summary, key))
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
