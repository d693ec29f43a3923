"""A server's own decode rate from its `/metrics` counters, per bench window (issue 40: vLLM sends no `timings`).

Bench scrapes `/metrics` before and after each measurement (`before:<prompt>` / `after:<prompt>`). Over one window
with one request finished, vLLM's `vllm:generation_tokens_total` grew by its tokens n and
`vllm:request_decode_time_seconds_sum` by its time from first token to last, so (n - 1) / decode time is the server's
figure for evalkit's decode tok/s ((completion_tokens - 1) / (last token - first token)). SGLang has no per-request
decode time, so only vLLM (and the sim, which serves vLLM's names) gets one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

from evalkit.evidence.request_lines import RequestLineJson
from evalkit.evidence.server_metrics import ScrapeLine, counter_deltas, window_pairs
from evalkit.stats import median, union_length

GENERATED = "vllm:generation_tokens_total"
DECODE_SUM = "vllm:request_decode_time_seconds_sum"
DECODE_COUNT = "vllm:request_decode_time_seconds_count"
SOURCE = f"(Δ{GENERATED} - 1) / Δ{DECODE_SUM}, one request per window"


def _total(deltas: dict[str, float], name: str) -> float | None:
    vals = [v for k, v in deltas.items() if k.split("{", 1)[0] == name]
    return sum(vals) if vals else None


def window_decode_rates(scrapes: Iterable[ScrapeLine], label: str) -> list[float]:
    """The server's decode tok/s of each `before:<label>` -> `after:<label>` window that finished one request."""
    out = []
    for pair in window_pairs(list(scrapes), f"before:{label}", f"after:{label}"):
        d = counter_deltas([pair])
        n, s, c = _total(d, GENERATED), _total(d, DECODE_SUM), _total(d, DECODE_COUNT)
        if n is not None and s and c == 1 and n > 1:
            out.append((n - 1) / s)
    return out


def decode_rate(scrapes: Iterable[dict[str, Any]], label: str) -> float | None:
    """Median of `window_decode_rates`, None when no window had one request and the counters."""
    return median(window_decode_rates(cast(Iterable[ScrapeLine], scrapes), label))


COMBINED_SOURCE = (
    f"(Δ{GENERATED} - 1) over the union of the streams' decode windows, Δ{DECODE_SUM} shared among the streams as "
    "the client's own decode windows share it, each ending at its last token"
)


def _shares(group: list[RequestLineJson], tokens: list[int]) -> list[float]:
    """Each stream's share of the streams' decode-time sum: its part of the client's summed decode windows (last
    token - first token), or of the tokens decoded where a window is missing or empty (every token in one read)."""
    # Every stream's t_last_token is set (combined_decode_rate skips a window without one).
    windows = [
        (cast(float, x["t_last_token"]) - first) if (first := x.get("t_first_token")) is not None else 0.0
        for x in group
    ]
    if all(w > 0 for w in windows):
        return [w / sum(windows) for w in windows]
    steps = sum(tokens) - len(group)
    return [(n - 1) / steps for n in tokens]


def combined_decode_rate(scrapes: Iterable[dict[str, Any]], groups: list[list[dict[str, Any]]]) -> float | None:
    """The server's combined decode tok/s of the concurrent streams (`groups`: each window's request lines), from
    vLLM's counters over each `before:concurrent` -> `after:concurrent` window that finished exactly that group:
    the tokens vLLM generated in the window, less one, over the union of the streams' decode windows.

    vLLM's histogram gives the sum of the streams' decode times (first token to last, by the engine's clock), not
    each one's, so the sum is shared among the streams in the proportions of the client's own decode windows, each
    stream's window ending at its last token. Sharing by tokens instead (equal times for equal lengths) is wrong
    for vLLM: the second stream's prefill runs in an engine step inside the first stream's decode, so the first
    one's window is a step longer (real vLLM 0.32 on 2 cores: 2.335 s against 2.198 s for 64 tokens each), and the
    union came out 2.8-3.9% short. The client's windows then fix only the streams' overlap; the time and the tokens
    are vLLM's, so a clock, unit or token-count error still shows as it does for one stream. Streams decoded in
    one batch give about the sum of their rates, streams that took turns the rate of one, as llama.cpp's
    `predicted_ms` windows do. Where a stream's window is empty (every token in one read) the sum is shared by
    tokens. Median over the windows; None without one."""
    rates = []
    for b, a in window_pairs(cast(list[ScrapeLine], list(scrapes)), "before:concurrent", "after:concurrent"):
        inside = [g for g in groups if g and all(b["t"] <= x["t_sent"] and x["t_done"] <= a["t"] for x in g)]
        if len(inside) != 1:
            continue
        group = inside[0]
        d = counter_deltas([(b, a)])
        total_s, count, made = _total(d, DECODE_SUM), _total(d, DECODE_COUNT), _total(d, GENERATED)
        tokens = [int(x.get("completion_tokens") or 0) for x in group]
        generated = int(made) if made is not None else sum(tokens)
        if (
            not total_s
            or count != len(group)
            or sum(tokens) - len(group) <= 0
            or generated <= 1
            or any(x.get("t_last_token") is None for x in group)
        ):
            continue
        shares = _shares(cast(list[RequestLineJson], group), tokens)
        union = union_length(
            (x["t_last_token"] - total_s * share, x["t_last_token"]) for x, share in zip(group, shares)
        )
        if union > 0:
            rates.append((generated - 1) / union)
    return median(rates)
