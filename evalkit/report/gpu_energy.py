"""The report's GPU table: power, energy per output token, SM utilization and memory per run, next to tok/s."""

from __future__ import annotations

from typing import Any

from evalkit.report.formatting import num
from evalkit.report.runs import LabelledRun, columns
from evalkit.report.tables import Table
from evalkit.runs.summary_parts import GpuTelemetry, MeanMax, TelemetryCard, TelemetryWindow


def _cell(v: Any, fmt: str) -> str:
    if v is None:
        return "–"
    return num(v) if fmt == ".3g" else format(v, fmt)  # significant digits, never in exponent form


def _tok_s(r: LabelledRun) -> str:
    if r.kind == "bench":
        rates = [p.tok_s for p in r.bench().prompts.values() if p.tok_s is not None]
        return " / ".join(f"{x:.1f}" for x in rates) or "–"
    s = r.stress()
    conc = s.metric("concurrent_combined_tok_s") if s is not None else None
    return _cell(conc.p50 if conc is not None else None, ".1f")


def _card(t: GpuTelemetry | None, g: int) -> TelemetryCard | None:
    return next((c for c in t.cards if c.gpu == g), None) if t is not None else None


def _window(t: GpuTelemetry | None, label: str | None = None) -> TelemetryWindow:
    w = (t.run if label is None else t.per_label.get(label)) if t is not None else None
    return w or TelemetryWindow()


def _mean_max(m: MeanMax | None) -> MeanMax:
    return m or MeanMax()


def gpu_table(runs: list[LabelledRun]) -> Table | None:
    """One column per run with GPU telemetry; None when no run has any."""
    tele = [r.record.gpu_telemetry_part() for r in runs]
    if not any(t is not None for t in tele):
        return None
    rows: list[tuple[str, list[str]]] = [
        ("decode tok/s (bench: per prompt; stress: two streams combined)", [_tok_s(r) for r in runs])
    ]
    rows.append(("energy per output token (J)", [_cell(_window(t).j_per_output_token, ".3g") for t in tele]))
    rows.append(("power while serving (W, mean)", [_cell(_window(t).power_w_mean, ".0f") for t in tele]))
    labels = sorted({k for t in tele if t is not None for k in t.per_label})
    for k in labels:
        rows.append((f"{k}: J per output token", [_cell(_window(t, k).j_per_output_token, ".3g") for t in tele]))
    gpus = sorted({c.gpu for t in tele if t is not None for c in t.cards})
    for g in gpus:
        cards = [_card(t, g) for t in tele]
        rows.append(
            (
                f"GPU {g} power (W, mean / max)",
                [
                    f"{_cell(_mean_max(c.power_w).mean, '.0f')} / {_cell(_mean_max(c.power_w).max, '.0f')}"
                    if c is not None
                    else "–"
                    for c in cards
                ],
            )
        )
        rows.append(
            (
                f"GPU {g} SM utilization (%, mean)",
                [_cell(_mean_max(c.sm_util_pct if c else None).mean, ".0f") for c in cards],
            )
        )
        rows.append(
            (f"GPU {g} memory used (MiB, max)", [_cell(c.mem_used_mib_max if c else None, ",.0f") for c in cards])
        )
    sources = sorted({f"{t.source}: energy from {t.energy_from}" for t in tele if t is not None})
    notes = [
        "energy per output token = the cards' energy over the requests' time (idle power included) / the "
        "tokens generated",
        *sources,
    ]
    return Table("gpu_telemetry", "GPU power and energy", columns(runs), rows, notes, row_header="what")
