"""Speculative-decoding acceptance from what the server says, per measured window (each bench prompt, the run).

vLLM: counters differenced over the window: acceptance rate = accepted / draft tokens, mean acceptance length =
1 + accepted / drafts (the verify pass's own token included), per position = accepted at position i / drafts.
SGLang: `sglang:spec_accept_length` / `sglang:spec_accept_rate` are gauges read at the window's end, so they
describe the server's recent steps, not the window (caveat kept beside the figure). No client-side estimate is
made: with one token per chunk the client cannot tell drafted tokens from plain ones.
"""

from __future__ import annotations

import re
from typing import Any

from evalkit.server_metrics import counter_deltas, window_pairs

_POSITION = re.compile(r'position="(\d+)"')
_VLLM = "vllm:spec_decode_"
_SGLANG_GAUGES = ("sglang:spec_accept_length", "sglang:spec_accept_rate")


def _name(series: str) -> str:
    return series.split("{", 1)[0]


def from_vllm_counters(deltas: dict[str, float]) -> dict[str, Any] | None:
    """Acceptance figures from differenced vLLM counters (summed over engines and models); None without drafts."""
    total: dict[str, float] = {}
    per_pos: dict[int, float] = {}
    for series, v in deltas.items():
        name = _name(series)
        if not name.startswith(_VLLM):
            continue
        if name == _VLLM + "num_accepted_tokens_per_pos_total":
            m = _POSITION.search(series)
            if m:
                per_pos[int(m.group(1))] = per_pos.get(int(m.group(1)), 0.0) + v
        else:
            total[name] = total.get(name, 0.0) + v
    drafts = total.get(_VLLM + "num_drafts_total", 0.0)
    if drafts <= 0:
        return None
    draft_tokens = total.get(_VLLM + "num_draft_tokens_total", 0.0)
    accepted = total.get(_VLLM + "num_accepted_tokens_total", 0.0)
    return {
        "source": "vllm counters (differenced over the window)",
        "drafts": drafts, "draft_tokens": draft_tokens, "accepted_tokens": accepted,
        "acceptance_rate": accepted / draft_tokens if draft_tokens else None,
        "mean_acceptance_length": 1.0 + accepted / drafts,
        "per_position": [per_pos[i] / drafts for i in sorted(per_pos)],
    }


def from_sglang_gauges(series: dict[str, float]) -> dict[str, Any] | None:
    """SGLang's acceptance gauges as read at one scrape; None when the server has none."""
    found = {g: v for g in _SGLANG_GAUGES for s, v in series.items() if _name(s) == g}
    if not found:
        return None
    return {
        "source": "sglang gauges at the window's end",
        "caveat": "a gauge cannot be windowed: it describes the server's latest steps, not only this window",
        "mean_acceptance_length": found.get("sglang:spec_accept_length"),
        "acceptance_rate": found.get("sglang:spec_accept_rate"),
    }


def window_spec(lines: list[dict[str, Any]], before: str, after: str) -> dict[str, Any] | None:
    """Acceptance over every (before, after) window of these labels: vLLM counters, else SGLang gauges."""
    pairs = window_pairs(lines, before, after)
    if not pairs:
        return None
    vllm = from_vllm_counters(counter_deltas(pairs))
    if vllm is not None:
        return {**vllm, "windows": len(pairs)}
    return from_sglang_gauges(pairs[-1][1]["series"])


def spec_summary(lines: list[dict[str, Any]]) -> dict[str, Any] | None:
    """summary.json's `spec_decode`: the whole run, and each labelled window (`before:<p>` / `after:<p>`)."""
    run = window_spec(lines, "before", "after")
    labels = sorted({ln["label"].split(":", 1)[1] for ln in lines if str(ln.get("label", "")).startswith("before:")})
    per = {p: s for p in labels if (s := window_spec(lines, f"before:{p}", f"after:{p}")) is not None}
    if run is None and not per:
        return None
    return {"run": run, "per_label": per}
