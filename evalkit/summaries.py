"""Finished runs by kind, and summary values named `<kind>.<path>` (the names gate rules and reports use)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from evalkit.errors import UsageError
from evalkit.rundir import iter_runs


@dataclass(frozen=True)
class FinishedRun:
    """One run directory's manifest and summary."""

    path: Path
    manifest: dict[str, Any]
    summary: dict[str, Any]

    @property
    def kind(self) -> str:
        """The run's kind: summary first, manifest as fallback."""
        return str(self.summary.get("kind") or self.manifest.get("kind"))


def load_runs(paths: Iterable[Path | str]) -> list[FinishedRun]:
    """Read each run directory; a directory without manifest and summary is a usage error."""
    return [FinishedRun(p, m, s) for p, m, s in iter_runs(paths)]


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
        raise UsageError(f"{metric} is not a number in {runs[kind].path / 'summary.json'} (it is {type(node).__name__})")
    return float(node)
