"""The prefix cache's hits by the server's own `/metrics` counters, between two scrapes (issue 40: a warm server).
Each server's counter names are its dialect's (evalkit.evidence.server_dialects):

vLLM (and the sim): `vllm:prefix_cache_hits_total` against `vllm:prefix_cache_queries_total`, both in prompt tokens.
llama.cpp: `llamacpp:prompt_tokens_cached_total` (reused) against `llamacpp:prompt_tokens_total` (computed).
SGLang: `sglang:cached_tokens_total` against `sglang:prompt_tokens_total` (every prompt token, cached ones included).
Everything the server served between the scrapes counts, so a server shared with other clients shows their reuse.
A run's window is its `before` -> `after` scrapes (summed over a resumed run's sessions): a command that probes the
server after its evidence started takes `before` again once done (stress: its stream-killing check, two requests of
44 prompt and 64 generated tokens on vLLM, which evalkit's requests.jsonl does not hold; issue 57).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypedDict, cast

from evalkit.evidence.server_dialects import by_precedence
from evalkit.evidence.server_metrics import ScrapeLine, window_pairs


class PrefixCacheHits(TypedDict):
    """The prefix cache's hits over a run (`hit_rate`), in the order written."""

    source: str
    cached_tokens: int
    prompt_tokens: int
    hit_rate: float | None


def _totals(series: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in series.items():
        name = key.split("{", 1)[0]
        out[name] = out.get(name, 0.0) + float(value)
    return out


def hit_rate(scrapes: Sequence[dict[str, Any]]) -> PrefixCacheHits | None:
    """`{"source", "cached_tokens", "prompt_tokens", "hit_rate"}` over the run's `before` -> `after` windows (each
    `after` with the last `before` ahead of it), or from the first ok scrape to the last where no such window is;
    None without two scrapes or without a server's cache counters."""
    snaps = [cast(ScrapeLine, s) for s in scrapes if s.get("ok") and isinstance(s.get("series"), dict)]
    pairs = [(_totals(b["series"]), _totals(a["series"])) for b, a in window_pairs(snaps, "before", "after")]
    if not pairs and len(snaps) >= 2:
        pairs = [(_totals(snaps[0]["series"]), _totals(snaps[-1]["series"]))]
    if not pairs:
        return None

    def delta(name: str) -> float | None:
        if not all(name in first and name in last for first, last in pairs):
            return None
        return sum(last[name] - first[name] for first, last in pairs)

    for c in (d.prefix_cache for d in by_precedence()):
        if c is None:
            continue
        cached, total = delta(c.cached), delta(c.total)
        if cached is None or total is None:
            continue
        prompt = cached + total if c.total_is_computed else total
        return {
            "source": c.source,
            "cached_tokens": int(cached),
            "prompt_tokens": int(prompt),
            "hit_rate": cached / prompt if prompt > 0 else None,
        }
    return None
