"""Bisect mode of `evalkit bench`: a measured rate becomes git bisect's exit code, and a log line per step.

Exit codes follow `git bisect run`: 0 good, 1 bad, 125 skip (between the thresholds, or nothing measured).
The log is JSONL, one line per step, appended so that `evalkit report --bisect-log FILE` can render the
write-up's commit table after the bisect ends.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.runs.bisect_log import BisectStep
from evalkit.runs.rundir import utc_now_iso

GOOD, BAD, SKIP = 0, 1, 125
VERDICTS = {GOOD: "good", BAD: "bad", SKIP: "skip"}


def check_thresholds(good_at_least: float, bad_at_most: float) -> None:
    """The good threshold must lie above the bad one, or every rate would be both."""
    if good_at_least <= bad_at_most:
        raise UsageError("--bisect-good-at-least must be greater than --bisect-bad-at-most")


def exit_code(value: float | None, good_at_least: float, bad_at_most: float) -> int:
    """0 at or above the good threshold, 1 at or below the bad one, 125 between them or when nothing was measured."""
    if value is None:
        return SKIP
    if value >= good_at_least:
        return GOOD
    if value <= bad_at_most:
        return BAD
    return SKIP


def git_commit_facts(cwd: Path | None = None) -> tuple[str | None, str | None, int | None]:
    """(short hash, subject, commit time) of HEAD in the working directory; Nones outside a git repository."""
    try:
        out = subprocess.run(
            ["git", "log", "-1", "--format=%h%x00%s%x00%ct"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None, None, None
    parts = out.split("\x00")
    if len(parts) != 3:
        return None, None, None
    return parts[0], parts[1], int(parts[2])


def make_step(
    commit: str | None,
    note: str | None,
    metric: str,
    value: float | None,
    code: int,
    good_at_least: float,
    bad_at_most: float,
    run_dir: Path | None,
    reason: str | None = None,
) -> BisectStep:
    """A log entry; commit and note default to the working directory's git HEAD."""
    head, subject, ctime = git_commit_facts()
    return BisectStep(
        commit=commit or head or "unknown",
        note=note if note is not None else (subject or ""),
        metric=metric,
        tok_s=value,
        verdict=VERDICTS[code],
        good_at_least=good_at_least,
        bad_at_most=bad_at_most,
        run_dir=str(run_dir) if run_dir else None,
        commit_time=ctime if _same_commit(commit, head) else None,
        at=utc_now_iso(),
        reason=reason,
    )


def _same_commit(given: str | None, head: str | None) -> bool:
    if given is None:
        return True
    if not head:
        return False
    return given.startswith(head) or head.startswith(given)
