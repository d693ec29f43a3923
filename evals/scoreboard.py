"""From graded lines to the contract's `summary.json` and the per-dataset table printed at the end of a run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypedDict

from evalkit.runs.schemas import OUTCOMES, GradedLine
from evalkit_evals import registry
from evalkit_evals.model_judge import judge_counts
from evalkit_evals.protocol import ScoreExtra
from evalkit_evals.question_scores import Graded, latest_per_sample, pass_at_1, question_scores


class PassAt1Json(TypedDict):
    """A score's `pass_at_1` with repeats (`question_scores.pass_at_1`, rounded)."""

    value: float
    ci95: list[float]
    questions: int
    repeats: int
    agreement: float


class SureCounts(TypedDict):
    """Issue #55's score as an interval (`sure_counts`)."""

    sure_correct: float
    unsure: float
    interval: list[float]


class JudgeSent(TypedDict):
    """A dataset's `judge`: lines sent to the judge model and how many it disagreed on."""

    sent: int
    disagree: int


class _Counts(TypedDict):
    correct: float  # a count; with repeats the sum of per-question mean scores
    total: int
    outcomes: dict[str, int]
    ambiguous: int
    sure_correct: float
    unsure: float
    interval: list[float]


class DatasetScore(_Counts, ScoreExtra, total=False):
    """One entry of summary.json's `scores`, or its `total` (read as `schemas.Score`): the rules' counts, the sure
    counts, with repeats the samples and pass@1, the dataset's own figures (`Eval.score_extra`) and the judge's."""

    samples: int
    pass_at_1: PassAt1Json | None
    judge: JudgeSent


def latest_per_id(lines: Sequence[Graded]) -> list[Graded]:
    """The last graded line of each id and repeat (a resumed run re-asks errored questions), in first-seen order."""
    return latest_per_sample(lines)


def _pass_at_1(lines: Sequence[GradedLine]) -> PassAt1Json | None:
    p = pass_at_1(list(question_scores(lines).values()))
    if p is None:
        return None
    return {
        "value": round(p.value, 4),
        "ci95": [round(p.low, 4), round(p.high, 4)],
        "questions": p.questions,
        "repeats": p.repeats,
        "agreement": round(p.agreement, 4),
    }


def _settled_by_judge(line: GradedLine) -> bool:
    judge = line.judge
    return judge is not None and bool(judge.settles) and judge.verdict in ("correct", "wrong")


def settled_correct(line: GradedLine) -> bool:
    """The line's grade: the judge's where it settled an unsure line (`judge.settles`), else the rules'."""
    if line.judge is not None and _settled_by_judge(line):
        return bool(line.judge.verdict == "correct")
    return line.correct


def is_sure(line: GradedLine) -> bool:
    """Whether the line's grade is sure: the readings agreed, or a judge settled it; a line written before issue
    #55 (no `sure`) counts as sure."""
    return _settled_by_judge(line) or line.sure is not False


def sure_counts(lines: Sequence[GradedLine]) -> SureCounts:
    """Issue #55's score as an interval: `sure_correct` (sure and right), `unsure` lines, and `interval`, the
    share right if every unsure line is wrong and if every one is right ([sure_correct, sure_correct + unsure] /
    N). With repeats, counts are sums of per-sample shares per question (one question weighs 1)."""
    if not any(ln.repeat for ln in lines):
        groups = [[ln] for ln in lines]  # one sample a question (a replay's every line is its own case)
    else:
        per_q: dict[str, list[GradedLine]] = {}
        for ln in latest_per_sample(lines):
            per_q.setdefault(ln.id, []).append(ln)
        groups = list(per_q.values())
    sure_right = sum(sum(is_sure(x) and settled_correct(x) for x in q) / len(q) for q in groups)
    unsure = sum(sum(not is_sure(x) for x in q) / len(q) for q in groups)
    n = len(groups)
    whole = all(len(q) == 1 for q in groups)
    sure_right_v: float = int(sure_right) if whole else round(sure_right, 4)
    unsure_v: float = int(unsure) if whole else round(unsure, 4)
    return {
        "sure_correct": sure_right_v,
        "unsure": unsure_v,
        "interval": [round(sure_right / n, 4), round((sure_right + unsure) / n, 4)] if n else [0.0, 0.0],
    }


def summarize(lines: Sequence[GradedLine], thinking: str | None, **extra: Any) -> dict[str, Any]:
    """`{"kind": "capability", "thinking", "scores": {ds: {correct, total, outcomes, ambiguous}}, "total": {...}}`
    + extras (`ambiguous`: grades whose readings disagree, see graded.jsonl's `readings`; `judge`: lines sent to
    a judge model and how often it disagrees with the rules, `model_judge.judge_counts`);
    with repeats, `correct` is the sum of per-question mean scores and each entry carries `pass_at_1`."""
    repeats = max(((ln.repeat or 0) + 1 for ln in lines), default=1)
    scores: dict[str, DatasetScore] = {}
    for ds in registry.names():  # lines of unregistered datasets (a replay's unknown ids) are not scored
        mine = [ln for ln in lines if ln.dataset == ds]
        if not mine:
            continue
        outcomes = {o: sum(1 for ln in mine if ln.outcome == o) for o in OUTCOMES}
        sure = sure_counts(mine)
        entry: DatasetScore = {
            "correct": outcomes["correct"],
            "total": len(mine),
            "outcomes": outcomes,
            "ambiguous": sum(1 for ln in mine if ln.ambiguous),
            "sure_correct": sure["sure_correct"],
            "unsure": sure["unsure"],
            "interval": sure["interval"],
        }
        if repeats > 1:
            # With repeats a question counts its mean score, so correct / total is pass@1 over questions.
            p1 = _pass_at_1(mine)
            assert p1 is not None  # mine is not empty, so neither are its question scores
            entry["correct"] = round(sum(q.score for q in question_scores(mine).values()), 4)
            entry["total"] = p1["questions"]
            entry["samples"] = len(mine)
            entry["pass_at_1"] = p1
        own = registry.get(ds).score_extra(mine)
        if "base_pass" in own:
            entry["base_pass"] = own["base_pass"]
        if "plus_pass" in own:
            entry["plus_pass"] = own["plus_pass"]
        judged = judge_counts(mine)
        if judged is not None:
            entry["judge"] = {"sent": judged["sent"], "disagree": judged["disagree"]}
        scores[ds] = entry
    correct = sum(s["correct"] for s in scores.values())
    total = sum(s["total"] for s in scores.values())
    outcomes = {o: sum(s["outcomes"][o] for s in scores.values()) for o in OUTCOMES}
    sure = sure_counts([ln for ln in lines if ln.dataset in scores])
    overall: DatasetScore = {
        "correct": correct,
        "total": total,
        "outcomes": outcomes,
        "ambiguous": sum(s["ambiguous"] for s in scores.values()),
        "sure_correct": sure["sure_correct"],
        "unsure": sure["unsure"],
        "interval": sure["interval"],
    }
    if repeats > 1:
        overall["correct"] = round(correct, 4)
        overall["samples"] = len(lines)
        overall["pass_at_1"] = _pass_at_1(lines)
    judged = judge_counts(lines)
    return {
        "kind": "capability",
        "thinking": thinking,
        "scores": scores,
        "total": overall,
        **({"repeats": repeats} if repeats > 1 else {}),
        **({"judge": judged} if judged is not None else {}),
        **extra,
    }


def thinking_warning(lines: Sequence[GradedLine], thinking: str | None) -> str | None:
    """A warning when the mode asked for did not take effect (servers drop switches their template lacks)."""
    asked = [ln for ln in lines if "thinking" in ln.model_fields_set]
    if not asked or thinking is None:
        return None
    seen = sum(1 for ln in asked if ln.thinking)
    if thinking != "off" and seen == 0:
        return f"thinking {thinking!r} was asked but no answer carried reasoning: the server ignored the switch"
    if thinking == "off" and seen:
        return f"thinking was asked off but {seen} of {len(asked)} answers carried reasoning"
    return None


def table(summary: dict[str, Any]) -> str:
    """The per-dataset table, plain text: the rules' counts, then issue #55's sure score (`pass@1` = sure-correct /
    N), the unsure grades and the interval they leave open."""
    head = ("dataset", "correct", "total", "acc", "wrong", "unparsed", "truncated", "error", "ambiguous")
    rows = [(*head, "sure", "pass@1", "unsure", "interval")]
    items = list(summary["scores"].items()) + [("total", summary["total"])]
    for name, s in items:
        o = s["outcomes"]
        acc = f"{100 * s['correct'] / s['total']:.1f}%" if s["total"] else "-"
        sure = s.get("sure_correct")
        pass1 = f"{100 * sure / s['total']:.1f}%" if sure is not None and s["total"] else "-"
        rows.append(
            (
                name,
                str(s["correct"]),
                str(s["total"]),
                acc,
                str(o["wrong"]),
                str(o["unparsed"]),
                str(o["truncated"]),
                str(o["error"]),
                str(s.get("ambiguous", "-")),
                str(s.get("sure_correct", "-")),
                pass1,
                str(s.get("unsure", "-")),
                "[{:.1%}, {:.1%}]".format(*s["interval"]) if s.get("interval") else "-",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows
    )
