"""Resuming a stress run cycle by cycle: which options must match, which cycles are done, which lines count.

Each start of `evalkit stress` on a run directory is one *attempt*: 0 the first time, then the number of
resumes recorded in `manifest.json` so far. Every line the attempt writes carries its number. A cycle is done
when `cycles.jsonl` holds its line, written only after the cycle's last request line; a cycle cut off mid-way
is run again from its start by the next attempt. Files are append-only, so the cut attempt's lines stay in
`requests.jsonl`; only the lines of the attempt that completed a cycle are counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.client.prompts import LongSpec
from evalkit.client.tokenize import FittedPrompt
from evalkit.errors import UsageError
from evalkit.runs.rundir import MANIFEST, REQUESTS, Line, read_json_object, read_jsonl
from evalkit_stress.schedule import Schedule

CYCLES_FILE = "cycles.jsonl"
# Options that change what is sent or when: a resume with any of them different would mix two schedules.
SCHEDULE_OPTIONS = (
    "seed",
    "cycles",
    "long_tokens",
    "shuffle",
    "reuse_long_prompt",
    "gen_tokens",
    "time_scale",
    "short_max_tokens",
    "long_max_tokens",
)


def attempt_of(manifest: Mapping[str, Any]) -> int:
    """This attempt's number: how many resumes the manifest records (0 for a fresh run)."""
    return len(manifest.get("resumes") or [])


def recorded_options(manifest: Mapping[str, Any]) -> dict[str, int | float | bool | str | None]:
    """The schedule options a stress run's manifest was started with (numbers, switches, names; None unset)."""
    stress = manifest.get("stress") or {}
    return {k: manifest.get(k) if k in ("seed", "cycles") else stress.get(k) for k in SCHEDULE_OPTIONS}


def _show(v: Any) -> str:
    if isinstance(v, bool):
        return "on" if v else "off"
    return "unset" if v is None else f"{v:g}" if isinstance(v, float) else str(v)


def check_resume(run_path: Path, wanted: Mapping[str, Any]) -> None:
    """Exit 2 (UsageError) when `run_path` holds a stress run started with different schedule options."""
    man_path = run_path / MANIFEST
    if not man_path.exists():
        return
    manifest = read_json_object(man_path)
    if manifest.get("kind") != "stress":  # said before any server time is spent
        raise UsageError(
            f"run directory {run_path} holds a {manifest.get('kind')!r} run, not 'stress'; pick another --name"
        )
    old = recorded_options(manifest)
    for k in SCHEDULE_OPTIONS:
        if old[k] != wanted[k]:
            flag = "--" + k.replace("_", "-")
            raise UsageError(
                f"cannot resume {run_path}: {flag} is {_show(wanted[k])} but the run was started with "
                f"{_show(old[k])}; use the same schedule options or a new --name"
            )


def completed_cycles(rows: Iterable[Line]) -> dict[int, int]:
    """Cycle -> the attempt that completed it, from `cycles.jsonl` (the first completion wins)."""
    out: dict[int, int] = {}
    for r in rows:
        out.setdefault(int(r["cycle"]), int(r.get("attempt", 0)))
    return out


@dataclass(frozen=True)
class CountedLines:
    """A run's lines split by whether they count: completed cycles, the latest attempt's cut cycle, the rest."""

    counted: list[Line]  # lines of completed cycles, from the attempt that completed each
    unfinished: list[Line]  # the latest attempt's lines of a cycle it did not complete (a partial run)
    calibration: list[Line]  # token-count calibration requests of the attempt whose counter the run uses
    abandoned: int  # lines of attempts cut off mid-cycle and then superseded, ignored


def split_lines(
    lines: Iterable[Line], completed: Mapping[int, int], latest_attempt: int, calibration_attempt: int | None
) -> CountedLines:
    """Sort every line by its (cycle, attempt) into counted, unfinished, calibration or abandoned."""
    counted: list[Line] = []
    unfinished: list[Line] = []
    calibration: list[Line] = []
    abandoned = 0
    for r in lines:
        cycle, attempt = int(r.get("cycle") or 0), int(r.get("attempt", 0))
        if r.get("scenario") == "calibration" or cycle == 0:
            if calibration_attempt is None or attempt == calibration_attempt:
                calibration.append(r)
            else:
                abandoned += 1
        elif cycle in completed:
            if completed[cycle] == attempt:
                counted.append(r)
            else:
                abandoned += 1
        elif attempt == latest_attempt:
            unfinished.append(r)
        else:
            abandoned += 1
    return CountedLines(counted, unfinished, calibration, abandoned)


def in_counted_cycle(row: Line, completed: Mapping[int, int]) -> bool:
    """Whether a per-cycle row (loop lag, GPU sample) belongs to the attempt that completed its cycle."""
    return counted_attempt(int(row.get("cycle") or 0), int(row.get("attempt", 0)), completed)


def counted_attempt(cycle: int, attempt: int, completed: Mapping[int, int]) -> bool:
    """Whether this attempt at the cycle is the one that completed it (`completed`: cycle -> attempt)."""
    return cycle in completed and completed[cycle] == attempt


def load_fitted(rows: Iterable[Line], schedule: Schedule) -> dict[LongSpec, FittedPrompt]:
    """Long prompts fitted by earlier attempts, so a re-run cycle sends exactly the prompt it was fitted with."""
    # Looked up by a fitted-prompt row's (first_word, code), either of which a row may lack.
    specs: dict[tuple[str | None, str | None], LongSpec] = {(q.first_word, q.code): q for q in schedule.long_specs()}
    # A scenario file may give each long request its own length; the built-in cycle uses --long-tokens.
    targets = {r.question: schedule.long_target(r) for r in schedule.requests() if isinstance(r.question, LongSpec)}
    out: dict[LongSpec, FittedPrompt] = {}
    for r in rows:
        q = specs.get((r.get("first_word"), r.get("code")))
        if q is None or q in out or r.get("target_tokens") != targets[q]:
            continue
        out[q] = FittedPrompt(
            text=q.text(int(r["sentences"])), sentences=int(r["sentences"]), counted_tokens=int(r["counted_tokens"])
        )
    return out


def read_counted(run_path: Path, up_to: int | None = None) -> tuple[CountedLines, dict[int, int]]:
    """A run directory's request lines split as its summary counts them, and its completed cycles (cycle -> the
    attempt that completed it); with `up_to`, as they stood after its first `up_to` cycles."""
    manifest = read_json_object(run_path / MANIFEST)
    completed = completed_cycles(read_jsonl(run_path / CYCLES_FILE))
    if up_to is not None:
        completed = {c: a for c, a in completed.items() if c <= up_to}
    calibration = (manifest.get("tokenization") or {}).get("attempt")
    split = split_lines(read_jsonl(run_path / REQUESTS), completed, attempt_of(manifest), calibration)
    return split, completed
