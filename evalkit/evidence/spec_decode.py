"""Speculative-decoding acceptance from what the server says, per measured window (each bench prompt, the run).

vLLM (`vllm:spec_decode_*`) and llama.cpp (`llamacpp:spec_decode_*`, tools/server/server-task.cpp: the same four
counters, `num_drafts_total` being its verification steps): counters differenced over the window: acceptance
rate = accepted / draft tokens, mean acceptance length = 1 + accepted / drafts (the verify pass's own token
included), per position = accepted at position i / drafts.
SGLang: `sglang:spec_accept_length` / `sglang:spec_accept_rate` are gauges read at the window's end, so they
describe the server's recent steps, not the window (caveat kept beside the figure). llama.cpp also gives each
request's `timings.draft_n` / `draft_n_accepted` (present only when it drafted): summed over the window's requests,
an acceptance rate with no positions. No client-side estimate is made: with one token per chunk the client cannot
tell drafted tokens from plain ones.
"""

from __future__ import annotations

import re
from typing import TypedDict

from evalkit.evidence.request_lines import RequestLineJson
from evalkit.evidence.server_dialects import by_precedence
from evalkit.evidence.server_metrics import ScrapeLine, counter_deltas, window_pairs

_POSITION = re.compile(r'position="(\d+)"')
_SGLANG_GAUGES = ("sglang:spec_accept_length", "sglang:spec_accept_rate")


class CounterAcceptance(TypedDict):
    """Draft acceptance from a server's differenced counters (`from_counters`), in the order written."""

    source: str
    server: str
    drafts: float
    draft_tokens: float
    accepted_tokens: float
    acceptance_rate: float | None
    mean_acceptance_length: float
    per_position: list[float]
    per_position_accepted: list[float]


class WindowedAcceptance(CounterAcceptance):
    """Counter acceptance over a window's scrape pairs (`window_spec`): how many pairs it summed."""

    windows: int


class GaugeAcceptance(TypedDict):
    """SGLang's acceptance gauges at a window's end (`from_sglang_gauges`)."""

    source: str
    caveat: str
    mean_acceptance_length: float | None
    acceptance_rate: float | None


class TimingsAcceptance(TypedDict):
    """llama.cpp's per-request draft counts summed (`from_timings`)."""

    source: str
    requests: int
    draft_tokens: float
    accepted_tokens: float
    acceptance_rate: float | None


class _SpecRun(TypedDict):
    run: WindowedAcceptance | GaugeAcceptance | None
    per_label: dict[str, WindowedAcceptance | GaugeAcceptance]


class SpecSummary(_SpecRun, total=False):
    """summary.json's `spec_decode` (`spec_summary`): the run's and each label's acceptance; `timings` and
    `timings_per_label` only where requests said they drafted."""

    timings: TimingsAcceptance
    timings_per_label: dict[str, TimingsAcceptance]


def _name(series: str) -> str:
    return series.split("{", 1)[0]


def from_counters(deltas: dict[str, float]) -> CounterAcceptance | None:
    """Acceptance figures from differenced vLLM or llama.cpp counters (summed over engines and models); None
    without drafts. `per_position` is accepted at position i / drafts, `per_position_accepted` the raw deltas."""
    # Each server's counter prefix is its dialect's; the counter names after the prefix are the same for all.
    for prefix, server in ((d.spec_decode_prefix, d.kind) for d in by_precedence() if d.spec_decode_prefix):
        got = _from_prefix(deltas, prefix, server)
        if got is not None:
            return got
    return None


def _from_prefix(deltas: dict[str, float], prefix: str, server: str) -> CounterAcceptance | None:
    total: dict[str, float] = {}
    per_pos: dict[int, float] = {}
    for series, v in deltas.items():
        name = _name(series)
        if not name.startswith(prefix):
            continue
        if name == prefix + "num_accepted_tokens_per_pos_total":
            m = _POSITION.search(series)
            if m:
                per_pos[int(m.group(1))] = per_pos.get(int(m.group(1)), 0.0) + v
        else:
            total[name[len(prefix) :]] = total.get(name[len(prefix) :], 0.0) + v
    drafts = total.get("num_drafts_total", 0.0)
    if drafts <= 0:
        return None
    draft_tokens = total.get("num_draft_tokens_total", 0.0)
    accepted = total.get("num_accepted_tokens_total", 0.0)
    return {
        "source": f"{server} /metrics counters {prefix}* (differenced over the window)",
        "server": server,
        "drafts": drafts,
        "draft_tokens": draft_tokens,
        "accepted_tokens": accepted,
        "acceptance_rate": accepted / draft_tokens if draft_tokens else None,
        "mean_acceptance_length": 1.0 + accepted / drafts,
        "per_position": [per_pos[i] / drafts for i in sorted(per_pos)],
        "per_position_accepted": [per_pos[i] for i in sorted(per_pos)],
    }


from_vllm_counters = from_counters  # the name before llama.cpp's counters were read


def from_timings(requests: list[RequestLineJson]) -> TimingsAcceptance | None:
    """llama.cpp's per-request `timings.draft_n` / `draft_n_accepted`, summed over the requests; None when no
    request says it drafted."""
    drafted = [
        t
        for r in requests
        if isinstance(t := r.get("server_timings"), dict) and isinstance(t.get("draft_n"), (int, float))
    ]
    if not drafted:
        return None
    n = sum(t["draft_n"] for t in drafted)
    acc = sum(t.get("draft_n_accepted") or 0 for t in drafted)
    return {
        "source": "llama.cpp timings draft_n / draft_n_accepted (per request, summed)",
        "requests": len(drafted),
        "draft_tokens": n,
        "accepted_tokens": acc,
        "acceptance_rate": acc / n if n else None,
    }


def from_sglang_gauges(series: dict[str, float]) -> GaugeAcceptance | None:
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


def window_spec(lines: list[ScrapeLine], before: str, after: str) -> WindowedAcceptance | GaugeAcceptance | None:
    """Acceptance over every (before, after) window of these labels: vLLM counters, else SGLang gauges."""
    pairs = window_pairs(lines, before, after)
    if not pairs:
        return None
    counters = from_counters(counter_deltas(pairs))
    if counters is not None:
        windowed: WindowedAcceptance = {**counters, "windows": len(pairs)}
        return windowed
    return from_sglang_gauges(pairs[-1][1]["series"])


def _label_requests(requests: list[RequestLineJson], label: str) -> list[RequestLineJson]:
    """A bench window's requests: `concurrent` is the concurrent group, any other label a prompt's single runs."""
    if label == "concurrent":
        return [r for r in requests if r.get("phase") == "concurrent"]
    return [r for r in requests if r.get("phase") == "single" and r.get("prompt") == label]


def spec_summary(lines: list[ScrapeLine], requests: list[RequestLineJson] | None = None) -> SpecSummary | None:
    """summary.json's `spec_decode`: the whole run, and each labelled window (`before:<p>` / `after:<p>`), from
    /metrics; with the run's request lines also llama.cpp's per-request draft counts (`timings`), beside them."""
    requests = requests or []
    run = window_spec(lines, "before", "after")
    labels = sorted({ln["label"].split(":", 1)[1] for ln in lines if str(ln.get("label", "")).startswith("before:")})
    per = {p: s for p in labels if (s := window_spec(lines, f"before:{p}", f"after:{p}")) is not None}
    timed = from_timings(requests)
    if run is None and not per and timed is None:
        return None
    out: SpecSummary = {"run": run, "per_label": per}
    if timed is not None:
        out["timings"] = timed
        out["timings_per_label"] = {p: t for p in labels if (t := from_timings(_label_requests(requests, p)))}
    return out
