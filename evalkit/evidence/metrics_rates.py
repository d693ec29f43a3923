"""A server's own decode rate from its `/metrics` counters, per bench window (issue 40: vLLM sends no `timings`).

Bench scrapes `/metrics` before and after each measurement (`before:<prompt>` / `after:<prompt>`). Over one window
with one request finished, vLLM's `vllm:generation_tokens_total` grew by its tokens n and
`vllm:request_decode_time_seconds_sum` by its time from first token to last, so (n - 1) / decode time is the server's
figure for evalkit's decode tok/s ((completion_tokens - 1) / (last token - first token)). SGLang has no per-request
decode time, so only vLLM (and the sim, which serves vLLM's names) gets one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from evalkit.evidence.server_metrics import counter_deltas, window_pairs
from evalkit.stats import median, union_length

GENERATED = "vllm:generation_tokens_total"
DECODE_SUM = "vllm:request_decode_time_seconds_sum"
DECODE_COUNT = "vllm:request_decode_time_seconds_count"
SOURCE = f"(Δ{GENERATED} - 1) / Δ{DECODE_SUM}, one request per window"


def _total(deltas: dict[str, float], name: str) -> float | None:
    vals = [v for k, v in deltas.items() if k.split("{", 1)[0] == name]
    return sum(vals) if vals else None


def window_decode_rates(scrapes: Iterable[dict[str, Any]], label: str) -> list[float]:
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
    return median(window_decode_rates(scrapes, label))


COMBINED_SOURCE = (
    f"Δ{DECODE_SUM} over the window's streams, each stream's share in proportion to its tokens, ending at its last "
    "token: (tokens - 1) over the union of those decode windows"
)


def combined_decode_rate(scrapes: Iterable[dict[str, Any]], groups: list[list[dict[str, Any]]]) -> float | None:
    """The server's combined decode tok/s of the concurrent streams (`groups`: each window's request lines), from
    vLLM's counters over each `before:concurrent` -> `after:concurrent` window that finished exactly that group.

    vLLM's histogram gives the sum of the streams' decode times, not each one's: each stream is given the share of
    the sum its tokens take (streams forced to one length decode for equal times, batched or in turn), its window
    ending at its last token. Streams decoded in one batch then give about the sum of their rates, streams that
    took turns the rate of one, as llama.cpp's `predicted_ms` windows do. The numerator is evalkit's own
    (all tokens less one), so the two figures compare like for like. Median over the windows; None without one."""
    rates = []
    for b, a in window_pairs(list(scrapes), "before:concurrent", "after:concurrent"):
        inside = [g for g in groups if g and all(b["t"] <= x["t_sent"] and x["t_done"] <= a["t"] for x in g)]
        if len(inside) != 1:
            continue
        group = inside[0]
        d = counter_deltas([(b, a)])
        total_s, count = _total(d, DECODE_SUM), _total(d, DECODE_COUNT)
        tokens = [int(x.get("completion_tokens") or 0) for x in group]
        steps = sum(tokens) - len(group)
        if not total_s or count != len(group) or steps <= 0 or any(x.get("t_last_token") is None for x in group):
            continue
        union = union_length(
            (x["t_last_token"] - total_s * (n - 1) / steps, x["t_last_token"]) for x, n in zip(group, tokens)
        )
        if union > 0:
            rates.append((sum(tokens) - 1) / union)
    return median(rates)
