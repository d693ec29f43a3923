"""Grades for a person to look at: per capability run, the answers whose readings disagree (`ambiguous`), the unsure
grades (issue #55), and those a judge model (`capability --judge-url`) graded otherwise than the rules, with their
readings, the rule that decided and the judge's verdict, and how often the judge and the rules disagree. Read from
graded.jsonl and summary.json."""

from __future__ import annotations

from typing import Any

from evalkit.report.runs import LabelledRun
from evalkit.report.tables import Table
from evalkit.runs.schemas import GradedLine, JudgeCounts
from evalkit_evals.model_judge import disagrees

MAX_ROWS = 50  # a long list belongs in graded.jsonl; the report shows the first ones and says how many more
_VALUE_CHARS = 80


def _short(text: Any) -> str:
    s = "–" if text is None else " ".join(str(text).split())
    return s if len(s) <= _VALUE_CHARS else s[: _VALUE_CHARS - 1] + "…"


def to_review(line: GradedLine) -> bool:
    """True for a line a person should look at: ambiguous, unsure (issue #55) and not settled by a judge, or graded
    otherwise by the judge."""
    settled = line.judge is not None and bool(line.judge.settles)
    return bool(line.ambiguous) or (line.sure is False and not settled) or disagrees(line)


def _readings(line: GradedLine) -> str:
    if not line.readings:
        return f"{_short(line.extracted)} ({line.rule or '–'})"
    found = [r for r in line.readings if r.get("value") is not None] or line.readings  # what each reader read
    return "; ".join(f"{_short(r.get('value'))} ({r.get('rule') or '–'})" for r in found)


def _judge_cell(line: GradedLine) -> str:
    j = line.judge
    if j is None:
        return "–"
    mark = " ≠ rules" if disagrees(line) else ""
    return f"{j.verdict}{mark}: {_short(j.words)}"


def _row_name(line: GradedLine) -> str:
    at = line.replay_line
    return f"{line.id} (line {at})" if at is not None else line.id


def _judge_note(j: JudgeCounts | None) -> str | None:
    if j is None:
        return None
    v = j.verdicts
    return (
        f"judge {', '.join(j.models)} was asked about {j.sent} line(s) (unsure grades): "
        f"it disagrees with the rules on {j.disagree} ({j.judge_right_rules_not} it calls right that "
        f"the rules did not, {j.rules_right_judge_not} the reverse), {v.get('unsure', 0)} unsure, "
        f"{v.get('error', 0)} could not be asked. `correct` stays the rules'; its correct/wrong settles an unsure "
        "grade in the sure score."
    )


def review_tables(runs: list[LabelledRun]) -> list[Table]:
    """One table per capability run with anything to look at (none for a run whose grades are all confident)."""
    out = []
    for r in runs:
        lines = [g for g in r.graded() if to_review(g)]
        note = _judge_note(r.capability().judge)
        if not lines and note is None:
            continue
        ambiguous = sum(1 for g in lines if g.ambiguous)
        rows = [
            (
                _row_name(g),
                [
                    f"{g.outcome}{' (ambiguous)' if g.ambiguous else ' (unsure)' if g.sure is False else ''}",
                    str(g.rule or "–"),
                    _readings(g),
                    _judge_cell(g),
                ],
            )
            for g in lines[:MAX_ROWS]
        ]
        unsure = sum(1 for g in lines if g.sure is False)
        notes = [
            f"{ambiguous} ambiguous grade(s): two readings of the answer disagree and the rule named decided; "
            "graded.jsonl's `readings` holds both, its `judge` the judge's verdict and words."
        ]
        if unsure:
            notes.append(
                f"{unsure} unsure grade(s) (issue #55): the strongest readings disagree, a fallback alone read the "
                "value, later text contradicts it, or nothing was read; the readings column lists what each read."
            )
        if note:
            notes.append(note)
        if len(lines) > MAX_ROWS:
            notes.append(f"{len(lines) - MAX_ROWS} more line(s) to look at in {r.run.path / 'graded.jsonl'}.")
        out.append(
            Table(
                f"capability_review_{r.label}",
                f"Grades to look at: {r.label} ({len(lines)})",
                ["outcome (rules)", "rule", "readings (rule)", "judge"],
                rows or [("(none)", ["no ambiguous grade, no disagreement", "", "", ""])],
                notes,
                row_header="question",
            )
        )
    return out
