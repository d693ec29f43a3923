"""The totals of a conversation or shared-prefix run's `summary.json`, computed from the run directory's files alone
(manifest, `requests.jsonl`): the load summary's `kind`, `mode`, `requests`, `errors`, `wrong_answers` and an empty
`points`; each chat workload (evalkit.load.chat_workloads) adds its own key, `conversation` or `shared_prefix`, from
the same files and `sessions.jsonl`.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

from evalkit.load.records import LoadLine, LoadSettings, read_lines
from evalkit.load.summary_records import LoadSummaryJson, SessionRecord
from evalkit.runs.rundir import MANIFEST, REQUESTS, read_json_object, read_jsonl

SESSIONS = "sessions.jsonl"  # one record per conversation (user) or per shared-prefix run (cold, warm)


def measured_lines(path: Path) -> list[LoadLine]:
    """The measured lines of the run's `requests.jsonl`."""
    return [x for x in read_lines(path / REQUESTS) if x.get("phase") == "measured"]


def read_sessions(path: Path) -> list[SessionRecord]:
    """The run's `sessions.jsonl`: one record per conversation or shared-prefix run."""
    return cast(list[SessionRecord], read_jsonl(path / SESSIONS))


def session_totals(path: Path) -> LoadSummaryJson:
    """The totals of a conversation or shared-prefix run's `summary.json`, from its manifest and requests."""
    manifest = read_json_object(path / MANIFEST)
    opts = cast(LoadSettings, manifest["load"])
    counted = [x for x in measured_lines(path) if x.get("run") != "prime"]
    return {
        "kind": "load",
        "seed": manifest.get("seed"),
        "mode": opts["mode"],
        "slo": [],
        "workload": {
            "prompt_tokens": opts["prompt_tokens"],
            "output_tokens": opts["output_tokens"],
            "token_scale": float(manifest.get("token_scale") or 1.0),
        },
        "requests": len(counted),
        "errors": sum(x.get("outcome") == "error" for x in counted),
        "wrong_answers": sum(x.get("outcome") == "wrong" for x in counted),
        "points": [],
    }
