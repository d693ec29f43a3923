"""`--baseline RUN_DIR` of `stress --until-sure` and `capability --repeats auto`: a finished run of the same kind to
compare against, or a one-line usage error naming what is wrong with it."""

from __future__ import annotations

from pathlib import Path

from evalkit.errors import UsageError
from evalkit.runs.rundir import read_json_object


def baseline_run_dir(where: str, kind: str, needs: str) -> Path:
    """The run directory `where`, checked to be a `kind` run holding `needs` (its requests or graded lines)."""
    path = Path(where)
    manifest = path / "manifest.json"
    if not manifest.is_file():
        raise UsageError(f"--baseline {where}: not a run directory (no manifest.json)")
    got = read_json_object(manifest).get("kind")
    if got != kind:
        raise UsageError(f"--baseline {where}: a {got} run, not a {kind} run")
    if not (path / needs).is_file():
        raise UsageError(f"--baseline {where}: the run has no {needs}")
    return path
