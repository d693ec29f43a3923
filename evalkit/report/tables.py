"""The write-up's before/after tables built from run summaries: one column per run, deltas against the first.

Each table holds formatted cells; templates only lay them out. A cell reads `116.1 (+15.8%) ▲`: the value as in
summary.json (rounded for display), its change against the first column and the noise mark (see noise.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalkit.bench.length_note import length_note
from evalkit.report import noise, trust
from evalkit.report.formatting import time_scale_words
from evalkit.report.runs import LabelledRun
from evalkit.runs.bisect_log import BisectStep
from evalkit.runs.schemas import BenchConcurrent, BenchPrompt, BenchRateSure, BenchSummary, StressSummary
from evalkit_stress import metric_registry


@dataclass(frozen=True)
class Table:
    """One markdown table: a title, column labels, rows of (name, cells) and notes printed under it."""

    key: str
    title: str
    columns: list[str]
    rows: list[tuple[str, list[str]]]
    notes: list[str] = field(default_factory=list)
    row_header: str = ""


def _num(v: Any, digits: int) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def _rel(value: float | None, base: float | None) -> str:
    if value is None or base is None or base == 0:
        return ""
    return f" ({(value - base) / abs(base) * 100:+.1f}%)"


def _cells(
    values: Sequence[float | None],
    digits: int,
    verdicts: Sequence[noise.NoiseVerdict | None],
    delta: Callable[[float | None, float | None], str] = _rel,
) -> list[str]:
    out = []
    for i, v in enumerate(values):
        text = _num(v, digits)
        if i and v is not None:
            text += delta(v, values[0])
            verdict = verdicts[i]
            if verdict is not None:
                text += f" {verdict.mark}"
        out.append(text)
    return out


def _get(d: Any, *path: str) -> Any:
    for k in path:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def _ordered(keys_per_run: Sequence[Sequence[str]], preferred: Sequence[str] = ()) -> list[str]:
    seen: list[str] = [k for k in preferred if any(k in ks for ks in keys_per_run)]
    for ks in keys_per_run:
        seen.extend(k for k in ks if k not in seen)
    return seen


def _legend(noise_floor: float) -> str:
    return (
        f"{noise.BETTER} better beyond noise, {noise.WORSE} worse beyond noise, {noise.WITHIN} within noise, "
        f"{noise.UNKNOWN} can't tell (too few runs for the test to reach its level: 3 runs a side never can, "
        f"4 against 5 or 5 against 5 can); rates by the Mann-Whitney rank test of the runs' rates, a table's "
        f"prompts one family (Holm, any false mark at most 5%), never under a {noise_floor:.0%} change; answers by "
        f"McNemar's exact test on paired questions."
    )


def bench_tables(runs: list[LabelledRun], noise_floor: float = noise.DEFAULT_NOISE_FLOOR) -> list[Table]:
    """Decode tok/s per prompt (headline), request tok/s per prompt, and the concurrency table."""
    cols = [r.label for r in runs]
    records = [r.bench() for r in runs]
    prompts = _ordered([list(b.prompts) for b in records], ("code", "math", "prose"))
    decode_rows, request_rows, notes = [], [], []
    # each table's figures of a pair are one family (Holm), so an identical pair shows no false mark at most 5% of
    # the time however many prompts it has
    decode_marks: list[dict[str, noise.NoiseVerdict]] = [{}]
    request_marks: list[dict[str, noise.NoiseVerdict]] = [{}]
    for b in records[1:]:
        pairs = {n: (records[0].prompts.get(n) or _NO_PROMPT, b.prompts.get(n) or _NO_PROMPT) for n in prompts}
        up = dict.fromkeys(prompts, True)
        raw = {n: noise.samples_verdict(x.runs, y.runs, True, noise_floor) for n, (x, y) in pairs.items()}
        decode_marks.append(noise.family(raw, up, noise.ALPHA, noise_floor))
        raw = {
            n: noise.samples_verdict(x.request_runs, y.request_runs, True, noise_floor) for n, (x, y) in pairs.items()
        }
        request_marks.append(noise.family(raw, up, noise.ALPHA, noise_floor))
    for name in prompts:
        entries = [b.prompts.get(name) or _NO_PROMPT for b in records]
        values = [e.tok_s for e in entries]
        verdicts = [None] + [decode_marks[i].get(name) for i in range(1, len(runs))]
        weighed = [False] + [
            trust.budget_cannot_explain(v, (entries[0], entries[i]), (runs[0], runs[i]), noise_floor)
            for i, v in enumerate(verdicts[1:], 1)
        ]
        verdicts = trust.suppress(runs, verdicts, weighed)
        decode_rows.append((name, _empty_cells(_cells(values, 1, verdicts), values, [e.failed for e in entries])))
        req = [e.request_tok_s for e in entries]
        if any(v is not None for v in req):
            rverdicts = [None] + [request_marks[i].get(name) for i in range(1, len(runs))]
            # send→done rates use no first-token stamp: the error budget cannot touch them
            untouched = [True] * len(runs)
            request_rows.append((name, _cells(req, 1, trust.suppress(runs, rverdicts, untouched))))
    for r, b in zip(runs, records):
        length = length_note(b.model_dump())
        if length:
            notes.append(f"{r.label}: {length}.")
        early = b.stopped_early
        if early:
            notes.append(
                f"{r.label}: {len(early)} request(s) stopped before max_tokens; their rates are less comparable."
            )
    for r, m in zip(runs[1:], decode_marks[1:]):
        notes += call_notes(r.label, m)
    tables = [
        Table(
            "bench",
            "Decode throughput, tok/s (completion tokens after the first over first→last token)",
            cols,
            decode_rows,
            notes + trust.notes(runs) + [_legend(noise_floor)],
            row_header="prompt",
        )
    ]
    answer_rows = _answer_rows(records, prompts)
    if answer_rows:
        tables.append(
            Table(
                "bench-reasoning",
                "First token and first answer token (after reasoning), s, and reasoning / answer tokens (medians)",
                cols,
                answer_rows,
                row_header="prompt",
            )
        )
    if request_rows:
        tables.append(
            Table(
                "bench_request",
                "Request throughput, tok/s (completion tokens over send→done)",
                cols,
                request_rows,
                row_header="prompt",
            )
        )
    if any(b.concurrent is not None for b in records):
        conc = [b.concurrent or BenchConcurrent() for b in records]
        streams = [c.streams for c in conc]
        combined = [c.combined_tok_s for c in conc]
        cverdicts = [None] + [noise.samples_verdict(conc[0].runs, c.runs, True, noise_floor) for c in conc[1:]]
        cverdicts = trust.suppress(runs, cverdicts)
        per_stream = [" / ".join(_num(x, 1) for x in c.per_stream_tok_s) or "–" for c in conc]
        rows = [
            ("streams", [_num(s, 0) for s in streams]),
            ("combined tok/s", _empty_cells(_cells(combined, 1, cverdicts), combined, [c.failed for c in conc])),
            ("per stream tok/s", per_stream),
        ]
        tables.append(
            Table(
                "concurrency",
                "Concurrent streams (combined: all streams' tokens over the union of their first→last token windows)",
                cols,
                rows,
                row_header="concurrency",
            )
        )
    sure = bench_sure_table(runs, records, prompts)
    return [*tables, *([sure] if sure else [])]


def _rate_sure_cell(median_rate: float | None, c: BenchRateSure | None) -> str:
    if c is None:
        return "–"
    spread = f" [{_num(c.interval[0], 1)}, {_num(c.interval[1], 1)}]" if c.interval else " (no interval yet)"
    return f"{'sure' if c.sure else 'undecided'}: {_num(median_rate, 1)}{spread}, n={c.n}"


def bench_sure_table(runs: list[LabelledRun], records: list[BenchSummary], prompts: list[str]) -> Table | None:
    """How sure each `bench --until-sure` run's medians are: each prompt's (and the streams') 95% interval and runs,
    and whether the run decided; None when no run was one."""
    if not any(b.until_sure for b in records):
        return None
    decided = [
        "–"
        if b.until_sure is None
        else f"every median within ±{b.until_sure.margin:.0%}"
        if b.until_sure.decided
        else f"still undecided after at most {b.until_sure.max_runs} runs: {', '.join(b.until_sure.undecided)}"
        for b in records
    ]
    rows = [("decided", decided)]
    for name in prompts:
        entries = [b.prompts.get(name) or _NO_PROMPT for b in records]
        rows.append((name, [_rate_sure_cell(e.tok_s, e.until_sure) for e in entries]))
    if any(b.concurrent is not None and b.concurrent.until_sure is not None for b in records):
        conc = [b.concurrent or BenchConcurrent() for b in records]
        rows.append(("combined (streams)", [_rate_sure_cell(c.combined_tok_s, c.until_sure) for c in conc]))
    return Table(
        "bench_until_sure",
        "How sure (bench --until-sure): median decode tok/s and its 95% interval",
        [r.label for r in runs],
        rows,
        [
            "The interval is distribution-free (two order statistics chosen by the binomial; none before 6 runs): it "
            "holds the true median at least 95% of the time whatever the rates' spread (docs/until-sure.md). "
            "n: runs measured."
        ],
        row_header="prompt",
    )


_NO_PROMPT = BenchPrompt(runs=[])


def _answer_rows(records: list[BenchSummary], prompts: list[str]) -> list[tuple[str, list[str]]]:
    """Bench rows of TTFT, time to the first answer token and the token split, when any run's server reasoned."""
    if not any((b.prompts.get(n) or _NO_PROMPT).reasoning_tokens for b in records for n in prompts):
        return []
    rows = []
    for name in prompts:
        entries = [b.prompts.get(name) or _NO_PROMPT for b in records]
        rows.append(
            (
                name,
                [
                    f"{_num(e.ttft_s, 3)} / {_num(e.ttft_answer_s, 3)} s; "
                    f"{_num(e.reasoning_tokens, 0)} / {_num(e.answer_tokens, 0)} tok"
                    for e in entries
                ],
            )
        )
    return rows


def _empty_cells(
    cells: list[str],
    values: Sequence[float | None],
    failed: Sequence[int | None],
    not_exercised: Sequence[str | None] | None = None,
) -> list[str]:
    """Never a figure made of nothing: an empty cell says what left it empty (failures, a situation that did not
    happen)."""
    out = list(cells)
    for i, v in enumerate(values):
        if v is not None:
            continue
        why = not_exercised[i] if not_exercised else None
        parts = ([why] if why else []) + ([f"{failed[i]} failed"] if failed[i] else [])
        if parts:
            out[i] = "– (" + "; ".join(parts) + ")"
    return out


def not_exercised_text(summary: StressSummary | None, metric: str) -> str | None:
    """ "not exercised: <reason> (n)" for a stress metric some of whose planned requests did not happen."""
    ne = summary.not_exercised_for(metric_registry.same_requests(metric)) if summary is not None else None
    if ne is None or not ne.count:
        return None
    return f"not exercised: {'; '.join(ne.reasons)} ({ne.count})"


def _stress_samples(run: LabelledRun, metric: str) -> list[float]:
    """What a stress figure is compared on: one value a cycle (evalkit_stress.metrics.cycle_values)."""
    from evalkit_stress.metrics import cycle_values

    return cycle_values(run.raw_requests(), metric)


def call_notes(label: str, marks: dict[str, noise.NoiseVerdict]) -> list[str]:
    """One note per figure called beyond noise: its mark, the test's p-value and the level it was called at."""
    out = []
    for name, v in marks.items():
        c = v.comparison
        if v.beyond and c is not None and c.p is not None:
            n = f"n={c.n_before}/{c.n_after}"
            out.append(f"{label}: {name} {v.mark} ({c.method} test p={c.p:.2g} at level {c.level:.2g}, {n})")
    return out


def stress_marks(
    base: LabelledRun, other: LabelledRun, metrics: Sequence[str], noise_floor: float = noise.DEFAULT_NOISE_FLOOR
) -> dict[str, noise.NoiseVerdict]:
    """Each stress metric of a pair compared on its raw samples, the metrics one family (Holm): the marks the stress
    table and the answer both show."""
    higher = {m: metric_registry.higher_is_better(m) for m in metrics}
    raw = {
        m: noise.samples_verdict(_stress_samples(base, m), _stress_samples(other, m), higher[m], noise_floor)
        for m in metrics
    }
    return noise.family(raw, higher, noise.ALPHA, noise_floor)


def stress_table(runs: list[LabelledRun], noise_floor: float = noise.DEFAULT_NOISE_FLOOR) -> Table:
    """The latency-under-load table: each metric's headline statistic, errors and wrong answers."""
    cols = [r.label for r in runs]
    records = [r.stress() for r in runs]
    metrics = _ordered([list(s.metrics) if s is not None else [] for s in records], metric_registry.table_order())
    rows: list[tuple[str, list[str]]] = []
    marks: list[dict[str, noise.NoiseVerdict]] = [{}]
    marks += [stress_marks(runs[0], r, metrics, noise_floor) for r in runs[1:]]
    for m in metrics:
        dists = [s.metric(m) if s is not None else None for s in records]
        missing = [not_exercised_text(s, m) for s in records]
        failed = [(s.failed_by_metric or {}).get(m) if s is not None else None for s in records]
        if not any(d is None or d.n != 0 for d in dists) and not any(missing) and not any(failed):
            continue  # a scenario no run measured
        verdicts: list[noise.NoiseVerdict | None] = [None]
        verdicts += [marks[i].get(m) for i in range(1, len(runs))]
        verdicts = trust.suppress(runs, verdicts)
        stat = metric_registry.headline(m)
        digits = 1 if m.endswith("tok_s") else 2
        values = [d.statistic(stat) if d is not None else None for d in dists]
        rows.append((f"{m} {stat}", _empty_cells(_cells(values, digits, verdicts), values, failed, missing)))
    for key in ("requests", "errors", "wrong_answers", "divergent"):
        vals = [r.summary.get(key) for r in runs]
        if any(v is not None for v in vals):
            rows.append((key, _cells(vals, 0, [None] * len(vals), _count_delta)))
    notes = [
        "Latency in seconds, throughput in tok/s; each metric's p50 / p95 / max over all cycles is in the "
        "runs' summary.json. Marks: the Mann-Whitney rank test of each metric's values a cycle (requests.jsonl) "
        "against the first column, the figures of a pair one family (Holm: any false call at most 5%), never under "
        "the noise floor; ? where the samples are too few for the test to reach its level."
    ]
    notes += trust.notes(runs)
    for r, pair in zip(runs[1:], marks[1:]):
        notes += call_notes(r.label, pair)
    time_scales = {r.label: (r.summary.get("options") or {}).get("time_scale") for r in runs}
    scaled = {label: f for label, f in time_scales.items() if f is not None and f not in (1, 1.0)}
    for factor in sorted(set(scaled.values())):
        who = ", ".join(k for k, v in scaled.items() if v == factor)
        notes.append(f"Run against a sped-up server ({who}: --time-scale {factor:g}): {time_scale_words(factor)}.")
    return Table("stress", "Latency under a long prefill (stress)", cols, rows, notes, row_header="metric")


def _count_delta(value: float | None, base: float | None) -> str:
    if value is None or base is None:
        return ""
    d = value - base
    return f" ({d:+d})" if isinstance(d, int) else f" ({d:+.3f}".rstrip("0").rstrip(".") + ")"


def bisect_table(entries: list[BisectStep]) -> Table:
    """The write-up's commit table from a bisect log: commit, note, measured tok/s and verdict."""
    by_commit: dict[str, BisectStep] = {}
    for e in entries:
        by_commit[str(e.commit)] = e  # a commit measured twice keeps its last verdict
    ordered = list(by_commit.values())
    times = [e.commit_time for e in ordered]
    if all(t is not None for t in times):
        ordered.sort(key=lambda e: e.commit_time or 0)
    metric = next((e.metric for e in ordered if e.metric), "code")
    rows = [(str(e.commit), [str(e.note or ""), _num(e.tok_s, 1), str(e.verdict)]) for e in ordered]
    notes = []
    if ordered:
        e = ordered[0]
        notes.append(f"good at ≥ {e.good_at_least} tok/s, bad at ≤ {e.bad_at_most} tok/s, skip in between.")
    return Table(
        "bisect",
        "Commits measured, in commit order",
        ["note", f"{metric} tok/s", "verdict"],
        rows,
        notes,
        row_header="commit",
    )
