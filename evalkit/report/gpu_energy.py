"""The report's GPU table: power, energy per output token, SM utilization and memory per run, next to tok/s."""

from __future__ import annotations

from typing import Any

from evalkit.report.runs import LabelledRun, columns
from evalkit.report.tables import Table
from evalkit.report.words import num


def _cell(v: Any, fmt: str) -> str:
    if v is None:
        return "–"
    return num(v) if fmt == ".3g" else format(v, fmt)  # significant digits, never in exponent form


def _tok_s(s: dict[str, Any]) -> str:
    if s.get("kind") == "bench":
        rates = [p.get("tok_s") for p in (s.get("prompts") or {}).values() if p.get("tok_s") is not None]
        return " / ".join(f"{r:.1f}" for r in rates) or "–"
    conc = ((s.get("metrics") or {}).get("concurrent_combined_tok_s") or {}).get("p50")
    return _cell(conc, ".1f")


def gpu_table(runs: list[LabelledRun]) -> Table | None:
    """One column per run with GPU telemetry; None when no run has any."""
    tele = [r.summary.get("gpu_telemetry") or {} for r in runs]
    if not any(tele):
        return None
    rows: list[tuple[str, list[str]]] = [
        ("decode tok/s (bench: per prompt; stress: two streams combined)", [_tok_s(r.summary) for r in runs])
    ]
    rows.append(
        ("energy per output token (J)", [_cell((t.get("run") or {}).get("j_per_output_token"), ".3g") for t in tele])
    )
    rows.append(
        ("power while serving (W, mean)", [_cell((t.get("run") or {}).get("power_w_mean"), ".0f") for t in tele])
    )
    labels = sorted({k for t in tele for k in (t.get("per_label") or {})})
    for k in labels:
        rows.append(
            (
                f"{k}: J per output token",
                [_cell(((t.get("per_label") or {}).get(k) or {}).get("j_per_output_token"), ".3g") for t in tele],
            )
        )
    gpus = sorted({c["gpu"] for t in tele for c in t.get("cards") or []})
    for g in gpus:

        def card(t: dict[str, Any], g: int = g) -> dict[str, Any]:
            return next((c for c in t.get("cards") or [] if c["gpu"] == g), {})

        rows.append(
            (
                f"GPU {g} power (W, mean / max)",
                [
                    f"{_cell((card(t).get('power_w') or {}).get('mean'), '.0f')} / "
                    f"{_cell((card(t).get('power_w') or {}).get('max'), '.0f')}"
                    if card(t)
                    else "–"
                    for t in tele
                ],
            )
        )
        rows.append(
            (
                f"GPU {g} SM utilization (%, mean)",
                [_cell((card(t).get("sm_util_pct") or {}).get("mean"), ".0f") for t in tele],
            )
        )
        rows.append((f"GPU {g} memory used (MiB, max)", [_cell(card(t).get("mem_used_mib_max"), ",.0f") for t in tele]))
    sources = sorted({f"{t.get('source')}: energy from {t.get('energy_from')}" for t in tele if t})
    notes = [
        "energy per output token = the cards' energy over the requests' time (idle power included) / the "
        "tokens generated",
        *sources,
    ]
    return Table("gpu_telemetry", "GPU power and energy", columns(runs), rows, notes, row_header="what")
