"""The stress section's diagnoses: each run's verdicts with their evidence and figures, in the write-up's words.

Rows read like the reference write-up ("short request during a 54K-token prefill, first token (p95)") with the
summary.json metric key beside them for scripts; verdicts come from summary.json's `diagnoses` as the run wrote
them (recomputable from the run's files by stress/summary.py).
"""

from __future__ import annotations

from typing import Any

from evalkit.report import formatting as w
from evalkit.report.runs import LabelledRun
from evalkit.report.tables import Table, not_exercised_text
from evalkit.runs.schemas import StressSummary, SureCheck
from evalkit.runs.summary_parts import Distribution
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
    tokens: set[Any] = {r.record.options_block().get("long_tokens") for r in runs} - {None}
    return f"{tokens.pop() / 1000:g}K-token" if len(tokens) == 1 else "long"


def _num(v: Any) -> str:
    return w.num(v)


def _largest_part(parts: dict[str, float]) -> tuple[str, float] | None:
    if not parts:
        return None
    k = max(parts, key=lambda x: parts[x])
    return w.cause(k), float(parts[k])


def _next_delay_words(d: VerdictReading) -> str | None:
    """What held the request sent after each cancel, with its figures: the longest wait and its largest part."""
    delays = [s.next_delay for s in d.samples if s.next_delay is not None]
    if not delays:
        cause = d.next_delay_cause
        return None if not cause or cause == CANT else f"the next request waited for {w.cause(cause)}"
    waits = [(x.wait_s, x) for x in delays if x.wait_s is not None]
    if waits:
        wait_s, worst = max(waits, key=lambda p: p[0])
        part = _largest_part(worst.parts_s)
        text = f"the next request waited up to {w.seconds(wait_s)} before the server started on it"
        if part:
            text += f", most of it ({w.seconds(part[1])}) for {part[0]}"
        return text
    ttfts = [x.ttft_s for x in delays if x.ttft_s is not None]
    if ttfts:
        return f"the next request's first token came up to {w.seconds(max(ttfts))} after it was sent"
    return None


def _hol_words(d: VerdictReading) -> list[str]:
    parts: list[str] = []
    if d.blocked is not None and d.judged:
        parts.append(f"{d.blocked} of {d.judged} short requests waited out the long prefill")
    if d.wait_fraction_p50 is not None:
        parts.append(f"their wait was {d.wait_fraction_p50:.0%} of the long prefill's remaining time (median)")
    waits = [(s.wait_before_start_s, s) for s in d.samples if s.wait_before_start_s is not None]
    if waits:
        wait_s, worst = max(waits, key=lambda p: p[0])
        text = f"the longest wait before the server started on one was {w.seconds(wait_s)}"
        part = _largest_part(worst.wait_parts_s)
        if part:
            text += f", most of it ({w.seconds(part[1])}) for {part[0]}"
        parts.append(text)
    elif d.cause and d.cause != CANT:
        parts.append(f"they waited for {w.cause(d.cause)}")
    return parts


def _concurrency_words(d: VerdictReading, run: StressSummary | None) -> list[str]:
    f = d.figures
    if not f:
        f = {k: (m.p50 if (m := _metric(run, k)) else None) for k in ("concurrent_combined_tok_s", "gen_alone_tok_s")}
    out = []
    combined, alone = f.get("concurrent_combined_tok_s"), f.get("gen_alone_tok_s")
    if combined is not None and alone is not None:
        out.append(f"two generations at once made {_num(combined)} tok/s together, one alone {_num(alone)} tok/s")
    eff = f.get("effective_concurrency", run.diagnosis("effective_concurrency_raw") if run is not None else None)
    if isinstance(eff, (int, float)):
        out.append(f"{eff:.2f} streams served at once (effective concurrency)")
    return out


def _metric(run: StressSummary | None, key: str) -> Distribution | None:
    return run.metric(key) if run is not None else None


def _verdict_cell(d: VerdictReading | None, run: StressSummary | None = None, key: str = "") -> str:
    """A verdict as a sentence with its figures and its evidence in words; never an identifier."""
    if d is None:
        return "–"
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
        nxt = _next_delay_words(d)
        if nxt:
            parts.append(nxt)
    elif key == "head_of_line_blocking":
        parts += _hol_words(d)
    elif key == "long_hurt_by_inserts":
        if d.ratio_p50 is not None:
            text = f"its own prefill took {d.ratio_p50:.3f}× its time alone"
            with_inserts, alone = d.figures.get("prefill_with_inserts_s_p50"), d.figures.get("prefill_alone_s_p50")
            if with_inserts is not None and alone is not None:
                text += f" ({w.seconds(with_inserts)} with inserts, {w.seconds(alone)} alone, medians)"
            parts.append(text)
    elif key == "concurrency":
        parts += _concurrency_words(d, run)
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
    records = [r.stress() for r in runs]
    for words, key, stat in FIGURES:
        vals = [m.statistic(stat) if (m := _metric(s, key)) else None for s in records]
        # A situation that never happened gets a row that says so, never a figure (stress/exercised.py).
        missing = [not_exercised_text(s, key) for s in records]
        failed = [(s.failed_by_metric or {}).get(key) if s is not None else None for s in records]
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
        for s in records:
            cells.append(_verdict_cell(VerdictReading.from_json(s.diagnosis(key)) if s else None, s, key))
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
    sure = sure_table(runs)
    return [figures, *([verdicts] if vrows else []), *([sure] if sure else [])]


def _sure_cell(c: SureCheck | None) -> str:
    if c is None:
        return "–"
    value = c.value if isinstance(c.value, str) else _num(c.value)
    spread = f" [{_num(c.interval[0])}, {_num(c.interval[1])}]" if c.interval and len(c.interval) == 2 else ""
    state = "decided" if c.decided else "undecidable here" if not c.holds else "undecided"
    return f"{state}: {value}{spread}, n={c.n} ({c.why})"


def sure_table(runs: list[LabelledRun]) -> Table | None:
    """How sure each `--until-sure` run was: after how many cycles it decided, and each check's value, interval and
    samples; None when no run was one."""
    blocks = [s.until_sure if (s := r.stress()) is not None else None for r in runs]
    if not any(blocks):
        return None
    names = list(dict.fromkeys(c.name for b in blocks if b for c in b.checks))
    rows = [
        (
            "decided",
            [
                "–"
                if b is None
                else f"after {b.cycles} of at most {b.max_cycles} cycles"
                if b.decided
                else f"still undecided after {b.cycles} of at most {b.max_cycles} cycles: {', '.join(b.undecided)}"
                for b in blocks
            ],
        )
    ]
    for name in names:
        rows.append(
            (
                f"`{name}`",
                [_sure_cell(next((c for c in b.checks if c.name == name), None)) if b else "–" for b in blocks],
            )
        )
    return Table(
        "stress_until_sure",
        "How sure (stress --until-sure)",
        [r.label for r in runs],
        rows,
        [
            "A figure is decided when its 95% interval lies within the run's margin of it (a median's "
            "distribution-free, a p95's or max's the bootstrap's: stable, no 95% promise; against a baseline: when "
            "the ratio is beyond noise or within the margin); a verdict when enough cycles agree "
            "(docs/until-sure.md). n: samples so far."
        ],
        row_header="",
    )
