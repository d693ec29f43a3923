"""From graded lines to the contract's `summary.json` and the per-dataset table printed at the end of a run."""

from __future__ import annotations

from typing import Any

from evalkit.runs.schemas import OUTCOMES
from evalkit_evals import registry
from evalkit_evals.model_judge import judge_counts
from evalkit_evals.question_scores import graded_lines, latest_per_sample, pass_at_1, question_scores


def latest_per_id(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last graded line of each id and repeat (a resumed run re-asks errored questions), in first-seen order."""
    return latest_per_sample(lines)


def _pass_at_1(lines: list[dict[str, Any]]) -> dict[str, Any] | None:
    p = pass_at_1(list(question_scores(graded_lines(lines)).values()))
    if p is None:
        return None
    return {
        "value": round(p.value, 4),
        "ci95": [round(p.low, 4), round(p.high, 4)],
        "questions": p.questions,
        "repeats": p.repeats,
        "agreement": round(p.agreement, 4),
    }


def settled_correct(line: dict[str, Any]) -> bool:
    """The line's grade: the judge's where it settled an unsure line (`judge.settles`), else the rules'."""
    judge = line.get("judge") or {}
    if judge.get("settles") and judge.get("verdict") in ("correct", "wrong"):
        return bool(judge["verdict"] == "correct")
    return bool(line.get("correct"))


def is_sure(line: dict[str, Any]) -> bool:
    """Whether the line's grade is sure: the readings agreed, or a judge settled it; a line written before issue
    #55 (no `sure`) counts as sure."""
    judge = line.get("judge") or {}
    if judge.get("settles") and judge.get("verdict") in ("correct", "wrong"):
        return True
    return line.get("sure") is not False


def sure_counts(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """Issue #55's score as an interval: `sure_correct` (sure and right), `unsure` lines, and `interval`, the
    share right if every unsure line is wrong and if every one is right ([sure_correct, sure_correct + unsure] /
    N). With repeats, counts are sums of per-sample shares per question (one question weighs 1)."""
    if not any(int(ln.get("repeat") or 0) for ln in lines):
        groups = [[ln] for ln in lines]  # one sample a question (a replay's every line is its own case)
    else:
        per_q: dict[str, list[dict[str, Any]]] = {}
        for ln in latest_per_sample(lines):
            per_q.setdefault(str(ln["id"]), []).append(ln)
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


def summarize(lines: list[dict[str, Any]], thinking: str | None, **extra: Any) -> dict[str, Any]:
    """`{"kind": "capability", "thinking", "scores": {ds: {correct, total, outcomes, ambiguous}}, "total": {...}}`
    + extras (`ambiguous`: grades whose readings disagree, see graded.jsonl's `readings`; `judge`: lines sent to
    a judge model and how often it disagrees with the rules, `model_judge.judge_counts`);
    with repeats, `correct` is the sum of per-question mean scores and each entry carries `pass_at_1`."""
    repeats = max((int(ln.get("repeat") or 0) + 1 for ln in lines), default=1)
    scores: dict[str, dict[str, Any]] = {}
    for ds in registry.names():  # lines of unregistered datasets (a replay's unknown ids) are not scored
        mine = [ln for ln in lines if ln["dataset"] == ds]
        if not mine:
            continue
        outcomes = {o: sum(1 for ln in mine if ln["outcome"] == o) for o in OUTCOMES}
        entry: dict[str, Any] = {
            "correct": outcomes["correct"],
            "total": len(mine),
            "outcomes": outcomes,
            "ambiguous": sum(1 for ln in mine if ln.get("ambiguous")),
            **sure_counts(mine),
        }
        if repeats > 1:
            # With repeats a question counts its mean score, so correct / total is pass@1 over questions.
            p1 = _pass_at_1(mine)
            assert p1 is not None  # mine is not empty, so neither are its question scores
            entry.update(
                correct=round(sum(q.score for q in question_scores(graded_lines(mine)).values()), 4),
                total=p1["questions"],
                samples=len(mine),
                pass_at_1=p1,
            )
        entry.update(registry.get(ds).score_extra(mine))
        judged = judge_counts(mine)
        if judged is not None:
            entry["judge"] = {"sent": judged["sent"], "disagree": judged["disagree"]}
        scores[ds] = entry
    correct = sum(s["correct"] for s in scores.values())
    total = sum(s["total"] for s in scores.values())
    outcomes = {o: sum(s["outcomes"][o] for s in scores.values()) for o in OUTCOMES}
    overall: dict[str, Any] = {
        "correct": correct,
        "total": total,
        "outcomes": outcomes,
        "ambiguous": sum(s["ambiguous"] for s in scores.values()),
        **sure_counts([ln for ln in lines if ln["dataset"] in scores]),
    }
    if repeats > 1:
        overall.update(correct=round(correct, 4), samples=len(lines), pass_at_1=_pass_at_1(lines))
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


def thinking_warning(lines: list[dict[str, Any]], thinking: str | None) -> str | None:
    """A warning when the mode asked for did not take effect (servers drop switches their template lacks)."""
    asked = [ln for ln in lines if "thinking" in ln]
    if not asked or thinking is None:
        return None
    seen = sum(1 for ln in asked if ln["thinking"])
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
