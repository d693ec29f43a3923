"""The report's "what the server says" section: build identity, draft acceptance, server counters, context, log flags.

Everything comes from each run's manifest (`server_identity`, `build_label`, `build`) and summary (`spec_decode`,
`server_metrics`, `server_log`), so an old run renders the same. Acceptance per position is marked against the
first run with a two-proportion test on the drafts counted (binomial noise), not guessed.
"""

from __future__ import annotations

import math
import re
from typing import Any

from evalkit.evidence.capture import evidence_summary
from evalkit.evidence.server_identity import IdentityRecord, identity_label
from evalkit.evidence.server_log import DEFAULT_PATTERNS
from evalkit.report import noise
from evalkit.report.context import FlaggedLog, ServerSaysContext
from evalkit.report.formatting import num
from evalkit.report.gpu_energy import gpu_table
from evalkit.report.model_rule import ModelNames
from evalkit.report.runs import LabelledRun, columns
from evalkit.report.tables import Table
from evalkit.runs.evidence_parts import GaugeRange, ServerMetrics, SpecDecode
from evalkit.runs.schemas import KindSummary, summary_record
from evalkit.runs.summary_parts import Number

RARE_SCRAPES = 2  # scrapes before and after a run only: too few for a gauge's maximum
_CONTEXT_NUMBER = re.compile(r"(\d[\d,]*)")
# Counter families worth a row, by server: (row name, series name, how to show it).
_COUNTER_ROWS = (
    ("prefix cache hits / queries", ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total")),
    ("preemptions", ("vllm:num_preemptions_total",)),
    ("prompt tokens", ("vllm:prompt_tokens_total", "llamacpp:prompt_tokens_total", "sglang:prompt_tokens_total")),
    (
        "generated tokens",
        ("vllm:generation_tokens_total", "llamacpp:tokens_predicted_total", "sglang:generation_tokens_total"),
    ),
    ("mean queue time (s)", ("vllm:request_queue_time_seconds_sum", "vllm:request_queue_time_seconds_count")),
    ("mean prefill time (s)", ("vllm:request_prefill_time_seconds_sum", "vllm:request_prefill_time_seconds_count")),
)
_GAUGE_ROWS = (
    (
        "running requests (max)",
        ("vllm:num_requests_running", "llamacpp:requests_processing", "sglang:num_running_reqs"),
    ),
    ("waiting requests (max)", ("vllm:num_requests_waiting", "llamacpp:requests_deferred", "sglang:num_queue_reqs")),
)


def _evidence(run: LabelledRun) -> KindSummary:
    """The run's record with its evidence fields, recomputed from its files when its summary predates them."""
    s = run.summary
    if ("server_metrics" in s and "spec_decode" in s) or not (run.run.path / "metrics.jsonl").exists():
        return run.record
    return summary_record({**s, **evidence_summary(run.run.path)}, run.run.path / "summary.json")


def _edges_only(run: LabelledRun) -> bool:
    """Whether every /metrics scrape of the run was taken before or after requests (bench, capability), never
    while one was in flight."""
    path = run.run.path / "metrics.jsonl"
    if not path.exists():
        return False
    from evalkit.runs.rundir import read_jsonl

    labels = [str(x.get("label") or "") for x in read_jsonl(path)]
    return bool(labels) and all(lb.split(":", 1)[0] in ("before", "after") for lb in labels)


def _sum(series: dict[str, Number], name: str) -> float | None:
    vals = [v for k, v in series.items() if k.split("{", 1)[0] == name]
    return sum(vals) if vals else None


def _gauge_max(gauges: dict[str, GaugeRange], name: str) -> float | None:
    vals = [g.max for k, g in gauges.items() if k.split("{", 1)[0] == name and g.max is not None]
    return max(vals) if vals else None


def one_per_build(runs: list[LabelledRun]) -> list[LabelledRun]:
    """The first run of each label (a build's identity is the same over its runs of one server)."""
    seen: dict[str, LabelledRun] = {}
    for r in runs:
        seen.setdefault(r.label, r)
    return list(seen.values())


def identity_table(runs: list[LabelledRun]) -> tuple[Table, list[str]]:
    """Who each build measured (one column per build), and a warning when the runs served different models."""
    all_runs = runs
    runs = one_per_build(runs)
    cols = [r.label for r in runs]
    rows: list[tuple[str, list[str]]] = []

    def row(name: str, values: list[Any]) -> None:
        if any(v not in (None, "", []) for v in values):
            rows.append((name, ["–" if v in (None, "") else str(v) for v in values]))

    models = ModelNames([r.run.manifest for r in all_runs])
    # Each build's model(s) by the report's one rule (evalkit.report.model_rule): one name per model.
    per_build = [
        ", ".join(dict.fromkeys(n for i, x in enumerate(all_runs) if x.label == r.label if (n := models.name(i))))
        for r in runs
    ]
    idents = [IdentityRecord.of(r.run.manifest) for r in runs]
    row(
        "build",
        [identity_label({**r.run.manifest, "model": m} if m else r.run.manifest) for r, m in zip(runs, per_build)],
    )
    row("model", per_build)
    row("server", [i.server_type for i in idents])
    row("version / build info", [i.version_text() for i in idents])
    row("slots", [i.props.total_slots if i.props else None for i in idents])
    row("context (server)", [i.context_length() for i in idents])
    row(
        "context per request (log)",
        [next((c for x in all_runs if x.label == r.label and (c := _context_from_log(x))), None) for r in runs],
    )
    keys = sorted({k for r in runs for k in (r.run.manifest.get("build") or {})})
    for k in keys:
        row(f"build.{k}", [(r.run.manifest.get("build") or {}).get(k) for r in runs])
    warnings = []
    distinct = models.distinct()
    if len(distinct) > 1:
        warnings.append(
            "the runs served different models (" + ", ".join(distinct) + "): their figures "
            "compare two models, not two builds"
        )
    return Table("server_identity", "Build identity", cols, rows, row_header="what"), warnings


def _context_from_log(run: LabelledRun) -> str | None:
    log = run.record.server_log_part()
    for ln in log.flagged_lines if log is not None else []:
        if "context_per_request" in ln.get("flags", []):
            # The number after the flagged phrase: a log line's own time stamp (FastLLM's "14:47:03,455") is
            # not a context length.
            where = re.search(DEFAULT_PATTERNS["context_per_request"], ln["line"])
            m = _CONTEXT_NUMBER.search(ln["line"], where.start() if where else 0)
            if m:
                return m.group(1)
    return None


def _prop_mark(p0: float, n0: float, p1: float, n1: float) -> str:
    se = math.sqrt(p0 * (1 - p0) / n0 + p1 * (1 - p1) / n1) if n0 and n1 else 0.0
    if se == 0:
        return noise.UNKNOWN
    if abs(p1 - p0) <= 2 * se:
        return noise.WITHIN
    return noise.BETTER if p1 > p0 else noise.WORSE


def acceptance_table(runs: list[LabelledRun]) -> Table | None:
    """Draft acceptance per position per bench prompt, one column per run; marks against the first column."""
    whole = [_evidence(r).spec_decode_part() or SpecDecode() for r in runs]
    specs = [w.per_label for w in whole]
    timed = [w.timings_per_label for w in whole]
    prompts = list(dict.fromkeys([*(p for s in specs for p in s), *(p for t in timed for p in t)]))
    if not prompts:
        return None
    rows: list[tuple[str, list[str]]] = []
    for p in prompts:
        base = specs[0].get(p)
        depth = max(len(e.per_position) if (e := s.get(p)) else 0 for s in specs)
        for i in range(depth):
            cells = []
            for s in specs:
                e = s.get(p)
                if e is None or i >= len(e.per_position):
                    cells.append("–")
                    continue
                pos = e.per_position
                cell = f"{pos[i]:.1%}"
                if base is not None and e is not base and i < len(base.per_position):
                    b = base.per_position[i]
                    cell += f" ({(pos[i] - b) * 100:+.1f} pt) " + _prop_mark(b, base.drafts or 0, pos[i], e.drafts or 0)
                cells.append(cell)
            rows.append((f"{p} position {i}", cells))
        if any(s.get(p) for s in specs):
            rows.append(
                (
                    f"{p} mean acceptance length",
                    [f"{e.mean_acceptance_length or 0:.2f}" if (e := s.get(p)) else "–" for s in specs],
                )
            )
        if any(t.get(p) for t in timed):
            rows.append(
                (
                    f"{p} acceptance rate (per-request timings)",
                    [
                        f"{e.acceptance_rate:.1%} of {e.draft_tokens:,}"
                        if (e := t.get(p)) and e.acceptance_rate is not None
                        else "–"
                        for t in timed
                    ],
                )
            )
    notes = [
        "per position = accepted at that draft position / drafts, from the server's counters differenced over "
        "the prompt's requests; marks: beyond two binomial standard errors of the drafts counted"
    ]
    sources = sorted(
        {e.source for s in specs for e in s.values() if e.source}
        | {e.source for t in timed for e in t.values() if e.source}
    )
    if sources:
        notes.append("source: " + "; ".join(sources))
    if any(e.caveat for s in specs for e in s.values()):
        notes.append("SGLang figures are gauges read after the prompt: they describe recent steps, not only it")
    return Table(
        "spec_acceptance",
        "Draft acceptance per position",
        columns(runs),
        rows,
        notes,
        row_header="prompt / position",
    )


def counters_table(runs: list[LabelledRun]) -> Table | None:
    """Server counters over each run (before -> after) and the largest queue/running gauges seen."""
    found = [_evidence(r).server_metrics_part() for r in runs]
    mets = [m or ServerMetrics() for m in found]
    if not any(m.available for m in mets):
        return None
    rows = []
    for name, series in _COUNTER_ROWS:
        cells = []
        for m in mets:
            vals = [_sum(m.counters, s) for s in series]
            if name.startswith("mean"):
                cells.append(num(vals[0] / vals[1]) if vals[0] is not None and vals[1] else "–")
            elif name.startswith("prefix"):
                cells.append(f"{vals[0]:.0f} / {vals[1]:.0f}" if None not in vals else "–")
            else:
                v = next((x for x in vals if x is not None), None)
                cells.append(f"{v:.0f}" if v is not None else "–")
        if any(c != "–" for c in cells):
            rows.append((name, cells))
    rare = False
    edges = [_edges_only(r) for r in runs]
    for name, series in _GAUGE_ROWS:
        cells = []
        for m, edge in zip(mets, edges):
            v = next((x for x in (_gauge_max(m.gauges, s) for s in series) if x is not None), None)
            scrapes = m.ok if "ok" in m.model_fields_set else m.scrapes
            if v is not None and (edge or (isinstance(scrapes, int) and scrapes <= RARE_SCRAPES)):
                # Scraped only before and after the run (or each request): a gauge's maximum then never saw a
                # request in flight and says nothing of the run itself.
                rare = True
                cells.append(f"⚠ – ({scrapes} scrapes, all before or after requests)")
            else:
                cells.append(f"{v:.0f}" if v is not None else "–")
        if any(c != "–" for c in cells):
            rows.append((name, cells))
    notes = (
        [
            "⚠ a gauge (requests running or waiting) scraped only before and after the run or its requests never "
            "saw a request in flight: no maximum is shown for it (a stress run scrapes during its cycles)."
        ]
        if rare
        else []
    ) + [
        f"{r.label}: /metrics unavailable ({m.first_error})"
        for r, m in zip(runs, found)
        if m is not None and not m.available
    ]
    return Table("server_counters", "Server counters over the run", columns(runs), rows, notes, row_header="what")


def server_says_section(runs: list[LabelledRun]) -> ServerSaysContext | None:
    """The section's context: tables, warnings, and the flagged log lines of each run."""
    if not runs:
        return None
    ident, warnings = identity_table(runs)
    tables = [ident]
    for t in (acceptance_table(runs), counters_table(runs), gpu_table(runs)):
        if t is not None:
            tables.append(t)
    flagged: list[FlaggedLog] = []
    for r in runs:
        log = r.record.server_log_part()
        if log is not None and log.flagged_lines:
            flagged.append(
                {
                    "label": r.label,
                    "kind": r.kind,
                    "path": log.path,
                    "lines": log.flagged_lines[:12],
                    "more": max(0, log.flagged - 12),
                }
            )
    return {"heading": "What the server says", "tables": tables, "warnings": warnings, "flagged": flagged}
