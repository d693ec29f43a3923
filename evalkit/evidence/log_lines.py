"""The lines of a run's `server_log.jsonl` as the log follower writes them (evalkit.evidence.server_log) and the
verdicts read them back (evalkit.evidence.server_evidence, evalkit.evidence.vllm_steps)."""

from __future__ import annotations

from typing import TypedDict


class _LogLineBase(TypedDict):
    t: float
    line: str
    flags: list[str]


class LogLine(_LogLineBase, total=False):
    """One line of `server_log.jsonl`: when it was read (`t`), its text, the patterns it matched; `earlier` on
    flagged lines already in the file when the run began, `t_after` when the follower read the file before it."""

    earlier: bool
    t_after: float
