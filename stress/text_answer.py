"""Judging a request that sent the user's own text: correct when the answer contains the file's `answer`."""

from __future__ import annotations

from evalkit.runs.judge_response import RequestVerdict, error_kind, judge
from evalkit.runs.records import RequestRecord

# The built-in judges by prompt kind (evalkit/runs/judge_response.py reads the answer by role name).
_JUDGE_ROLE = {"long": "long", "short": "short", "count": "gen"}


def _normal(text: str) -> str:
    return " ".join(text.split()).casefold()


def judge_text(rec: RequestRecord, answer: str | None, planned_cancel: bool) -> RequestVerdict:
    """Error, wrong or correct; without an `answer` any non-empty finished response is correct."""
    kind = error_kind(rec)
    if planned_cancel:
        return (
            RequestVerdict("cancelled_as_planned")
            if kind in (None, "cancelled", "empty")
            else RequestVerdict("error", kind)
        )
    if kind is not None:
        return RequestVerdict("error", kind)
    content = rec.content or ""
    if not answer:
        return RequestVerdict("correct", extracted=content[:40])
    # Whitespace and case do not matter: servers differ in both for the same answer.
    found = _normal(answer) in _normal(content)
    return RequestVerdict("correct" if found else "wrong", extracted=content[:40])


def judge_prompt(rec: RequestRecord, prompt: str, expected: str, planned_cancel: bool) -> RequestVerdict:
    """The verdict for a request of prompt kind `prompt` (long, short, count or text)."""
    if prompt == "text":
        return judge_text(rec, expected or None, planned_cancel)
    return judge(rec, _JUDGE_ROLE[prompt], expected, planned_cancel)
