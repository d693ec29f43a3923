"""The report's GPU memory section: per card peak, the slopes per request, per hour and per cycle with their
noise, and the leak verdict.

Figures come from each run's summary.json (`gpu_memory`, `gpu_memory_verdict`); a run summarised before the
present verdict (no per-request slope) is judged again from its `gpu_memory.jsonl` and `requests.jsonl`, so an
old run gets the same section and the same verdict a new one would.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

from evalkit.evidence.gpu_memory import (
    FLAT_RANGE_SHARE,
    GPU_FILE,
    MIN_GROWTH_MIB,
    GpuCardJson,
    done_times,
    leak_verdict,
    summarize_gpu,
)
from evalkit.evidence.request_lines import RequestLineJson
from evalkit.report import noise
from evalkit.report.context import MemoryContext, MemoryVerdict
from evalkit.report.runs import LabelledRun
from evalkit.report.tables import Table
from evalkit.runs.rundir import REQUESTS, Line, read_jsonl
from evalkit.runs.summary_parts import GpuCard, GpuMemoryVerdict

# Keyed by a card's `verdict` as read from summary.json: None (no verdict) finds no text.
VERDICT_TEXT: dict[str | None, str] = {
    "growing": "growing",
    "falling": "falling",
    "flat": "flat",
    "cant_tell": "can't tell",
    "too_few_cycles": "too few cycles",
}


@dataclass(frozen=True)
class RunMemory:
    """One run's cards (keyed by index as text) and, for runs with cycles, the leak verdict."""

    run: LabelledRun
    cards: dict[str, GpuCard]
    verdict: GpuMemoryVerdict | None


def gpu_samples(run: LabelledRun) -> list[Line]:
    """The run's `gpu_memory.jsonl` lines that its summary counts (cycle 0 and the cycles it completed)."""
    lines = read_jsonl(run.run.path / GPU_FILE)
    completed = run.completed_attempts()
    if not completed:
        return lines
    from evalkit_stress.resume import in_counted_cycle

    return [s for s in lines if int(s.get("cycle") or 0) == 0 or in_counted_cycle(s, completed)]


def run_memory(run: LabelledRun) -> RunMemory | None:
    """The run's GPU memory figures, or None when it sampled none."""
    cards = run.record.gpu_cards()
    verdict = run.record.gpu_verdict()
    if not cards or any("slopes" not in c.model_fields_set for c in cards.values()):
        judged = summarize_gpu(
            gpu_samples(run), done_times(cast(list[RequestLineJson], read_jsonl(run.run.path / REQUESTS)))
        )
        if judged:
            cards = {k: GpuCard.model_validate(c) for k, c in judged.items()}
            verdict = _judged_verdict(judged) if run.kind == "stress" else None
    if not cards:
        return None
    if run.kind != "stress":
        verdict = None
    elif verdict is None:
        verdict = _judged_verdict({k: cast(GpuCardJson, c.model_dump(exclude_unset=True)) for k, c in cards.items()})
    return RunMemory(run, cards, verdict)


def _judged_verdict(cards: dict[str, GpuCardJson]) -> GpuMemoryVerdict | None:
    v = leak_verdict(cards)
    return GpuMemoryVerdict.model_validate(v) if v is not None else None


def _mib(v: float | None, signed: bool = False) -> str:
    if v is None:
        return "–"
    return f"{v:+.1f}" if signed else f"{v:.0f}"


def _slope_mark(base: GpuCard, other: GpuCard) -> str:
    """Beyond noise when the slopes differ by more than their noises combined and by a visible growth."""
    a, b = base.slope_mib_per_cycle, other.slope_mib_per_cycle
    na, nb = base.slope_noise_mib_per_cycle, other.slope_noise_mib_per_cycle
    if a is None or b is None or na is None or nb is None:
        return noise.UNKNOWN
    span = max(len(base.cycles), len(other.cycles)) - 1
    diff = b - a
    if abs(diff) <= math.hypot(na, nb) or abs(diff) * span < MIN_GROWTH_MIB:
        return noise.WITHIN
    return noise.WORSE if diff > 0 else noise.BETTER  # memory that grows faster is worse


def _peak_mark(base: GpuCard, other: GpuCard, noise_floor: float) -> str:
    return noise.samples_verdict(base.cycle_peak_mib, other.cycle_peak_mib, False, noise_floor).mark


# The order the table's runs go in: the stress runs (the ones with cycles and a verdict) first, then each other kind.
KIND_ORDER = ("stress", "bench", "capability", "load")


def column_name(run: LabelledRun) -> str:
    """A run's column: its build, its kind and its run directory (a build has one column per run that sampled)."""
    return f"{run.label} · {run.kind} · {run.run.path.name}"


def by_kind(mems: list[RunMemory]) -> list[RunMemory]:
    """The runs grouped by kind (stress, bench, capability, load, then any other), each kind in report order."""
    kinds = list(KIND_ORDER) + [k for k in dict.fromkeys(m.run.kind for m in mems) if k not in KIND_ORDER]
    return [m for k in kinds for m in mems if m.run.kind == k]


def memory_table(mems: list[RunMemory], noise_floor: float = noise.DEFAULT_NOISE_FLOOR) -> Table:
    """One column per run, grouped by kind, seven rows per card; deltas and marks against the first run of the same
    kind only: a bench run's peak is never set against a stress run's (other requests, other lengths, other time)."""
    mems = by_kind(mems)
    indices = sorted({int(k) for m in mems for k in m.cards})
    first_of_kind = {m.run.kind: j for j, m in reversed(list(enumerate(mems)))}
    rows: list[tuple[str, list[str]]] = []
    for i in indices:
        cards = [m.cards.get(str(i)) for m in mems]
        names = [(c.name if c is not None else None) or "–" for c in cards]
        if any(n != "–" for n in names):
            rows.append((f"GPU {i} name", names))
        peak, slope = [], []
        for k, c in enumerate(cards):
            if c is None:
                peak.append("–")
                slope.append("–")
                continue
            p, s = _mib(c.peak_mib), _mib(c.slope_mib_per_cycle, signed=True)
            j = first_of_kind[mems[k].run.kind]
            base = cards[j]
            if k != j and base is not None:
                if c.peak_mib is not None and base.peak_mib is not None:
                    p += f" ({c.peak_mib - base.peak_mib:+.0f}) {_peak_mark(base, c, noise_floor)}"
                if c.slope_mib_per_cycle is not None:
                    s += f" {_slope_mark(base, c)}"
            peak.append(p)
            slope.append(s)
        rows.append((f"GPU {i} peak MiB", peak))
        rows.append((f"GPU {i} slope MiB/cycle", slope))
        rows.append((f"GPU {i} slope noise ± MiB/cycle", [_noise(c) for c in cards]))
        rows.append((f"GPU {i} slope MiB/hour", [_per_hour(c) for c in cards]))
        rows.append((f"GPU {i} slope MiB/request", [_per_request(c) for c in cards]))
        rows.append(
            (
                f"GPU {i} verdict",
                [
                    VERDICT_TEXT.get(c.verdict, "–") if m.verdict is not None and c is not None else "–"
                    for m, c in zip(mems, cards)
                ],
            )
        )
    notes = [
        "Each column is one run: its build · its kind (stress, bench or capability) · its run directory. A change "
        "(in brackets) and its mark are against the first run of the same kind only (" + _firsts(mems) + "); runs "
        "of different kinds sent other requests for another time, and are never compared.",
        "Per card, from nvidia-smi memory.used: peak over the run; three least-squares slopes, each with its noise "
        "(99.98% half-width): each cycle's peak per cycle, memory per hour of run time and per finished request "
        "(these two widened for autocorrelated samples). growing = any slope beyond its noise and at least "
        f"{MIN_GROWTH_MIB:.0f} MiB over the run; flat = every slope within noise and the memory's range within "
        f"{100 * FLAT_RANGE_SHARE:.0f}% of its peak; can't tell = neither. Marks: peak by a bootstrap over cycle "
        "peaks, slope per cycle beyond "
        f"noise when the difference passes both noises combined ({noise.WORSE} grows faster). Per hour in the "
        "run's own hours (a run against a sped-up sim has sped-up hours).",
    ]
    return Table(
        "gpu_memory", "GPU memory per card", [column_name(m.run) for m in mems], rows, notes, row_header="card"
    )


def _firsts(mems: list[RunMemory]) -> str:
    seen: dict[str, str] = {}
    for m in mems:
        seen.setdefault(m.run.kind, column_name(m.run))
    return "; ".join(f"{k}: {v}" for k, v in seen.items())


def _noise(c: GpuCard | None) -> str:
    n = c.slope_noise_mib_per_cycle if c is not None else None
    return "–" if n is None else f"{n:.1f}"


def _per_hour(c: GpuCard | None) -> str:
    if c is None or c.slope_mib_per_hour is None:
        return "–"
    v, n = c.slope_mib_per_hour, c.slope_noise_mib_per_hour
    return f"{v:+.0f}" + (f" ± {n:.0f}" if n is not None else "")


def _per_request(c: GpuCard | None) -> str:
    if c is None or c.slope_mib_per_request is None:
        return "–"
    v, n = c.slope_mib_per_request, c.slope_noise_mib_per_request
    return f"{v:+.1f}" + (f" ± {n:.1f}" if n is not None else "")


def memory_section(runs: list[LabelledRun], noise_floor: float = noise.DEFAULT_NOISE_FLOOR) -> MemoryContext | None:
    """The template's `memory`: each run's verdict line and the per-card table; None when no run sampled memory."""
    mems = [m for m in (run_memory(r) for r in runs) if m is not None]
    if not mems:
        return None
    mems = by_kind(mems)
    verdicts: list[MemoryVerdict] = [
        {"label": column_name(m.run), "verdict": m.verdict.verdict, "evidence": m.verdict.evidence}
        for m in mems
        if m.verdict
    ]
    return {
        "heading": "GPU memory",
        "verdicts": verdicts,
        "table": memory_table(mems, noise_floor),
        "runs": [column_name(m.run) for m in mems],
    }
