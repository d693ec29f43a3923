"""The bisect log (`evalkit bench --bisect-log FILE`): one JSON line per `git bisect run` step, appended as each
step ends, and read back by `evalkit report --bisect-log` for the write-up's commit table."""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from evalkit.errors import UsageError
from evalkit.runs.rundir import read_records


class BisectStep(BaseModel):
    """One bisect step as logged, written and read as this record: which commit, what was measured, and the
    verdict. A reader takes logs of any version (every field may be missing; extra keys are kept)."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    commit: str | None = None
    note: str | None = None
    metric: str | None = None
    tok_s: int | float | None = None
    verdict: str | None = None
    good_at_least: int | float | None = None
    bad_at_most: int | float | None = None
    run_dir: str | None = None
    commit_time: int | float | None = None
    at: str | None = None
    reason: str | None = None


def append_step(log: Path, step: BisectStep) -> None:
    """Append one step to the bisect log (one flushed JSON line)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a", encoding="utf-8") as f:
        f.write(json.dumps(step.model_dump()) + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_log(log: Path) -> list[BisectStep]:
    """Every step of a bisect log; a missing file, or a line that is not a step, is a usage error."""
    if not log.exists():
        raise UsageError(f"bisect log not found: {log}")
    return read_records(log, BisectStep)
