"""The prefix-cache hit rate from the server's own `/metrics`, over a run: the counters' change from its first
snapshot to its last (`metrics.jsonl`, written by the run's evidence capture).

llama.cpp: `llamacpp:prompt_tokens_cached_total` (prompt tokens reused) against `llamacpp:prompt_tokens_total`
(prompt tokens computed). vLLM (and the sim): `vllm:prefix_cache_hits_total` against
`vllm:prefix_cache_queries_total`, both in tokens. Everything the server served between the snapshots counts,
so a server shared with other clients shows their reuse too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalkit.runs.rundir import read_jsonl

METRICS_FILE = "metrics.jsonl"


def _totals(series: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in series.items():
        name = key.split("{", 1)[0]
        out[name] = out.get(name, 0.0) + float(value)
    return out


def metrics_hit_rate(run_dir: Path) -> dict[str, Any] | None:
    """`{"source", "cached_tokens", "prompt_tokens", "hit_rate"}` from the run's metrics, or None without them."""
    path = run_dir / METRICS_FILE
    if not path.exists():
        return None
    snaps = [s for s in read_jsonl(path) if s.get("ok") and isinstance(s.get("series"), dict)]
    if len(snaps) < 2:
        return None
    first, last = _totals(snaps[0]["series"]), _totals(snaps[-1]["series"])

    def delta(name: str) -> float | None:
        return last[name] - first[name] if name in first and name in last else None

    hits, queries = delta("vllm:prefix_cache_hits_total"), delta("vllm:prefix_cache_queries_total")
    if hits is not None and queries is not None:
        source, cached, prompt = "vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total", hits, queries
    else:
        reused, computed = delta("llamacpp:prompt_tokens_cached_total"), delta("llamacpp:prompt_tokens_total")
        if reused is None or computed is None:
            return None
        source = "llamacpp:prompt_tokens_cached_total / (cached + llamacpp:prompt_tokens_total)"
        cached, prompt = reused, reused + computed
    return {
        "source": source,
        "cached_tokens": int(cached),
        "prompt_tokens": int(prompt),
        "hit_rate": cached / prompt if prompt > 0 else None,
    }
