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
from evalkit.stats import median

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
