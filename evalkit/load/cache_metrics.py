"""The prefix-cache hit rate from the server's own `/metrics`, over a run: the counters' change over its `before` ->
`after` snapshots (`metrics.jsonl`, written by the run's evidence capture); the counters by server are in
evalkit/evidence/prefix_cache_counters.py (vLLM, llama.cpp, SGLang).
"""

from __future__ import annotations

from pathlib import Path

from evalkit.evidence.prefix_cache_counters import PrefixCacheHits, hit_rate
from evalkit.runs.rundir import read_jsonl

METRICS_FILE = "metrics.jsonl"


def metrics_hit_rate(run_dir: Path) -> PrefixCacheHits | None:
    """`{"source", "cached_tokens", "prompt_tokens", "hit_rate"}` from the run's metrics, or None without them."""
    path = run_dir / METRICS_FILE
    if not path.exists():
        return None
    return hit_rate(read_jsonl(path))
