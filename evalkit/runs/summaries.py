"""Finished runs by kind, and summary values named `<kind>.<path>` (the names gate rules and reports use)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from evalkit.errors import UsageError
from evalkit.runs.rundir import iter_runs, read_records
from evalkit.runs.schemas import GradedLine, KindSummary, TaggedRequestLine, summary_record


@dataclass(frozen=True)
class FinishedRun:
    """One run directory's manifest and summary."""

    path: Path
    manifest: dict[str, Any]
    summary: dict[str, Any]

    @cached_property
    def record(self) -> KindSummary:
        """The summary as its kind's typed record (`evalkit.runs.schemas.summary_record`)."""
        return summary_record(self.summary, self.path / "summary.json")

    @cached_property
    def request_records(self) -> tuple[TaggedRequestLine, ...]:
        """requests.jsonl as records, read once however many sections and cycles ask (empty when absent)."""
        return tuple(read_records(self.path / "requests.jsonl", TaggedRequestLine))

    @cached_property
    def graded_records(self) -> tuple[GradedLine, ...]:
        """graded.jsonl as records, read once (empty when absent)."""
        return tuple(read_records(self.path / "graded.jsonl", GradedLine))

    @property
    def kind(self) -> str:
        """The run's kind: summary first, manifest as fallback."""
        return str(self.summary.get("kind") or self.manifest.get("kind"))


def load_runs(paths: Iterable[Path | str]) -> list[FinishedRun]:
    """Read each run directory; a directory without manifest and summary is a usage error."""
    return [FinishedRun(p, m, s) for p, m, s in iter_runs(paths)]


# The file each kind's figures come from; a run directory without it cannot be what its summary says.
LINES_FILE = {
    "bench": "requests.jsonl",
    "stress": "requests.jsonl",
    "load": "requests.jsonl",
    "capability": "graded.jsonl",
}
# The built-in evals (evalkit_evals.registry.BUILTIN, which the core may not import; tests/test_eval_registry.py keeps
# the two equal); a run's user evals are declared in its manifest.
KNOWN_DATASETS = ("gsm8k", "math500", "musr", "humanevalplus")


def run_warnings(run: FinishedRun) -> list[str]:
    """What is odd about a run directory without making its summary wrong: no finish time, no lines file."""
    out = []
    if run.manifest.get("finished") is None and not run.summary.get("incomplete"):
        out.append(f"{run.path}: the run never finished (manifest.json has no finish time)")
    wanted = LINES_FILE.get(str(run.summary.get("kind")))
    if wanted and not (run.path / wanted).exists():
        out.append(f"{run.path}: a {run.summary.get('kind')} summary but no {wanted}")
    return out


def run_problems(run: FinishedRun) -> list[str]:
    """Why a run directory does not hold what it claims: kinds that disagree, an incomplete run, a capability run
    whose graded answers are none or name unknown datasets. Report warns; gate refuses (exit 2)."""
    out = []
    man_kind, sum_kind = run.manifest.get("kind"), run.summary.get("kind")
    if man_kind != sum_kind:
        out.append(f"{run.path}: summary.json says kind {sum_kind!r} but manifest.json says {man_kind!r}")
    if run.summary.get("incomplete") or run.manifest.get("incomplete"):
        why = (run.summary.get("incomplete") or run.manifest.get("incomplete") or {}).get("error", "")
        out.append(f"{run.path}: the run is incomplete ({why})" if why else f"{run.path}: the run is incomplete")
        return out
    if sum_kind == "capability" and (run.path / "graded.jsonl").exists():
        from evalkit.runs.rundir import read_jsonl

        lines = read_jsonl(run.path / "graded.jsonl")
        if not lines:
            out.append(f"{run.path}: graded.jsonl holds no graded answers")
        # The built-ins, and the user evals (`--eval FILE`) this run's manifest declares.
        known = set(KNOWN_DATASETS) | set(run.manifest.get("user_evals") or {})
        unknown = sorted({str(ln.get("dataset") or str(ln.get("id", "")).split(":", 1)[0]) for ln in lines} - known)
        if unknown:
            out.append(f"{run.path}: graded answers name unknown dataset(s): {', '.join(unknown)}")
        scored = set(run.summary.get("scores") or {})
        if scored - known:
            out.append(f"{run.path}: summary.json scores unknown dataset(s): {', '.join(sorted(scored - known))}")
    return out


def runs_by_kind(runs: list[FinishedRun], what: str = "runs") -> dict[str, FinishedRun]:
    """One run per kind, as gate rules name values by kind; two runs of one kind are a usage error."""
    out: dict[str, FinishedRun] = {}
    for r in runs:
        if r.kind in out:
            raise UsageError(f"two {r.kind} runs among the {what} ({out[r.kind].path}, {r.path}); give one per kind")
        out[r.kind] = r
    return out


def lookup(metric: str, runs: dict[str, FinishedRun]) -> float | None:
    """The number at `<kind>.<path>` or None when any step is missing; non-numbers are usage errors."""
    kind, _, path = metric.partition(".")
    if kind not in runs or not path:
        return None
    node: Any = runs[kind].summary
    for key in path.split("."):
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return None
    if node is None:
        return None
    if isinstance(node, bool):
        return float(node)
    if not isinstance(node, (int, float)) or math.isnan(node):
        raise UsageError(
            f"{metric} is not a number in {runs[kind].path / 'summary.json'} (it is {type(node).__name__})"
        )
    return float(node)
