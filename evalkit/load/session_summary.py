"""`summary.json` of a conversation or shared-prefix run, computed from the run directory's files alone (manifest,
`requests.jsonl`, `sessions.jsonl`), so an old run's summary can be recomputed: the load summary's totals (`kind`,
`mode`, `requests`, `errors`, `wrong_answers`, an empty `points`) and the workload's own key, `conversation` or
`shared_prefix`, with the hit rate from the server's metrics beside the answers' `cache_n`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalkit.load import conversation, shared_prefix
from evalkit.load.cache_metrics import metrics_hit_rate
from evalkit.load.workload import Lengths
from evalkit.runs.rundir import MANIFEST, REQUESTS, read_json_object, read_jsonl

SESSIONS = "sessions.jsonl"  # one record per conversation (user) or per shared-prefix run (cold, warm)


def session_summary(path: Path) -> dict[str, Any]:
    """`summary.json` of a conversation or shared-prefix run, from its manifest, requests and sessions files."""
    manifest = read_json_object(path / MANIFEST)
    opts = manifest["load"]
    lines = [x for x in read_jsonl(path / REQUESTS) if x.get("phase") == "measured"]
    records = read_jsonl(path / SESSIONS)
    prompt, output = (
        Lengths.parse(opts["prompt_tokens"], "prompt_tokens"),
        Lengths.parse(opts["output_tokens"], "output_tokens"),
    )
    scale = float(manifest.get("token_scale") or 1.0)
    kind = opts["mode"]
    counted = [x for x in lines if x.get("run") != "prime"]
    out: dict[str, Any] = {
        "kind": "load",
        "seed": manifest.get("seed"),
        "mode": kind,
        "slo": [],
        "workload": {
            "prompt_tokens": opts["prompt_tokens"],
            "output_tokens": opts["output_tokens"],
            "token_scale": scale,
        },
        "requests": len(counted),
        "errors": sum(x.get("outcome") == "error" for x in counted),
        "wrong_answers": sum(x.get("outcome") == "wrong" for x in counted),
        "points": [],
    }
    if kind == "conversation":
        cspec = conversation.ConversationSpec(
            opts["users"], opts["turns"], opts["think_s"], prompt, output, manifest.get("seed") or 0, scale
        )
        out["conversation"] = conversation.summarise(lines, records, cspec)
    else:
        runs = tuple(r["run"] for r in records)
        sspec = shared_prefix.SharedPrefixSpec(
            opts["groups"],
            opts["users_per_group"],
            opts["system_tokens"],
            prompt,
            output,
            runs,
            opts["concurrency"],
            manifest.get("seed") or 0,
            scale,
        )
        out["shared_prefix"] = shared_prefix.summarise(lines, records, sspec)
    out[kind]["prefix_cache_metrics"] = metrics_hit_rate(path)  # the whole run, from the server's counters
    return out
