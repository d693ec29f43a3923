"""The expert table of issue 24 (tests/cases/capability_expert_cases.py): every row's outcome and rule, through
the grading functions for GSM8K, MATH-500 and MuSR, and through `evalkit capability --replay` for answers with
inline reasoning (one replay per dataset)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cases.capability_expert_cases import _Q, CLASSES, GSM8K, MATH500, MUSR, REASONING
from evalkit_evals import gsm8k, math500, musr
from evalkit_evals.math_judge import MathJudge

EVALKIT = [sys.executable, "-m", "evalkit"]


@pytest.fixture(scope="module")
def judge() -> Iterator[MathJudge]:
    j = MathJudge()
    yield j
    j.close()


def test_table_size() -> None:
    """At least 200 rows, and at least 8 for every class of the issue."""
    assert sum(len(rows) for rows in CLASSES.values()) >= 200
    assert {name: len(rows) for name, rows in CLASSES.items() if len(rows) < 8} == {}


@pytest.mark.parametrize("question, gold, answer, expected, rule, why", GSM8K, ids=[r[5] for r in GSM8K])
def test_gsm8k(question: str | None, gold: str, answer: str, expected: str, rule: str, why: str) -> None:
    verdict = gsm8k.grade({"question": question or _Q, "answer": f"worked\n#### {gold}"}, answer)
    assert (verdict.outcome, verdict.rule) == (expected, rule), verdict.why


@pytest.mark.parametrize("gold, answer, expected, rule, why", MATH500, ids=[r[4] for r in MATH500])
def test_math500(judge: MathJudge, gold: str, answer: str, expected: str, rule: str, why: str) -> None:
    verdict = math500.grade({"answer": gold}, answer, judge)
    assert (verdict.outcome, verdict.rule) == (expected, rule), verdict.why


@pytest.mark.parametrize("choices, gold, answer, expected, rule, why", MUSR, ids=[r[5] for r in MUSR])
def test_musr(choices: list[str], gold: int, answer: str, expected: str, rule: str, why: str) -> None:
    verdict = musr.grade({"choices": str(choices), "answer_index": gold}, answer)
    assert (verdict.outcome, verdict.rule) == (expected, rule), verdict.why


def test_disagreeing_readings_are_recorded() -> None:
    """Two readings that disagree make the grade ambiguous, with both; one reading is not ambiguous."""
    row = {"question": _Q, "answer": "#### 18"}
    two = gsm8k.grade(row, "#### 18\nThe answer is 20")
    assert two.correct and two.ambiguous
    assert [(r.rule, r.value) for r in two.readings] == [("gsm8k.hash_line", "18"), ("gsm8k.answer_label", "20")]
    assert not gsm8k.grade(row, "#### 18\nThe answer is 18").ambiguous
    conflict = musr.grade({"choices": str(["Mackenzie", "Ana"]), "answer_index": 1}, "ANSWER: 2 (Mackenzie)")
    assert conflict.ambiguous and {r.value for r in conflict.readings} == {"1", "2"}
    later = musr.grade(
        {"choices": str(["Mackenzie", "Ana"]), "answer_index": 0}, "ANSWER: 2\n\nSo my final answer is 1."
    )
    assert later.correct and [r.value for r in later.readings] == ["2", "1"]
    hedge = gsm8k.grade(row, "The answer is 18 or 20.")
    assert hedge.outcome == "wrong" and hedge.ambiguous


def test_math_box_and_a_later_stated_answer_that_disagree(judge: MathJudge) -> None:
    """The box decides; a stated answer after it that grades otherwise makes the grade ambiguous, with both."""
    verdict = math500.grade({"answer": "\\frac{14}{3}"}, "\\boxed{\\frac{14}{3}}\n\nAnswer: 5", judge)
    assert verdict.correct and verdict.ambiguous
    assert [(r.rule, r.value) for r in verdict.readings] == [
        ("math500.boxed", "\\frac{14}{3}"),
        ("math500.answer_label", "5"),
    ]
    assert not math500.grade({"answer": "\\frac{14}{3}"}, "\\boxed{\\frac{14}{3}}\n\nAnswer: 14/3", judge).ambiguous


def _replay(tmp_path: Path, answers: list[dict], name: str) -> tuple[list[dict], dict, Path]:
    src = tmp_path / f"{name}.jsonl"
    src.write_text("".join(json.dumps(a) + "\n" for a in answers), encoding="utf-8")
    proc = subprocess.run(
        [*EVALKIT, "capability", "--replay", str(src), "--out", str(tmp_path), "--name", name],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    run = Path(proc.stdout.strip().splitlines()[-1])
    return (
        [json.loads(ln) for ln in (run / "graded.jsonl").read_text().splitlines()],
        json.loads((run / "summary.json").read_text()),
        run,
    )


@pytest.mark.parametrize("dataset", ["gsm8k", "math500", "musr", "humanevalplus"])
def test_replay_grades_only_after_the_last_think(tmp_path: Path, dataset: str) -> None:
    """Inline `<think>...</think>` in `content`: a number, box, choice or code only inside it is `unparsed`, a
    draft rejected inside it never counts; every line names its rule."""
    rows = [r for r in REASONING if r[0].startswith(dataset + ":")]
    assert len(rows) >= 4
    graded, _, _ = _replay(tmp_path, [{"id": r[0], "content": r[1], "reasoning": None} for r in rows], dataset)
    got = [(g["outcome"], g["rule"]) for g in graded]
    assert got == [(r[2], r[3]) for r in rows], [g["why"] for g in graded]
    assert all(g["thinking"] for g in graded)  # the inline reasoning is seen as thinking


def test_replay_lines_carry_rule_and_summary_and_report_count_ambiguous(tmp_path: Path) -> None:
    answers = [
        {"id": "gsm8k:0", "content": "#### 18\nThe answer is 20"},
        {"id": "gsm8k:0", "content": "#### 18"},
        {"id": "gsm8k:1", "content": "The answer is 3."},
        {"id": "musr:murder_mysteries/0", "content": "ANSWER: 2 (Mackenzie)"},
        {"id": "math500:test/algebra/2584.json", "content": "\\boxed{\\frac{14}{3}}"},
    ]
    graded, summary, run = _replay(tmp_path, answers, "ambiguous")
    assert all(g["rule"] and "." in g["rule"] and isinstance(g["ambiguous"], bool) for g in graded)
    first = graded[0]
    assert first["ambiguous"] and {"18", "20"} <= {r["value"] for r in first["readings"]}
    assert first["sure"] is False and graded[1]["sure"] is True  # issue #55: every reading kept, sure or not
    assert all(r["strength"] in ("rules", "fallback", "plain", "marker", "later") for r in first["readings"])
    # A replay's summary counts lines (each its own case): gsm8k:0's first answer is ambiguous, its second is not.
    assert summary["scores"]["gsm8k"]["ambiguous"] == 1 and summary["scores"]["gsm8k"]["total"] == 3
    assert summary["scores"]["musr"]["ambiguous"] == 1
    assert summary["scores"]["math500"]["ambiguous"] == 0
    assert summary["total"]["ambiguous"] == 2
    out = tmp_path / "report.md"
    proc = subprocess.run([*EVALKIT, "report", str(run), "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows: dict[str, list[str]] = {}  # the first table holding a row name is the scores table
    for ln in out.read_text().splitlines():
        if ln.startswith("| "):
            rows.setdefault(ln.split("|")[1].strip(), [c.strip() for c in ln.split("|")[2:-1]])
    # issue #55: the score counts sure grades, the unsure ones beside it with the interval they leave open
    assert rows["musr"] == ["0/1 · 1 unsure [0, 1]/1"]
    assert rows["gsm8k"] == ["2/3 · 1 unsure [2, 3]/3"] and rows["total"] == ["3/5 · 2 unsure [3, 5]/5"]
    assert rows["ambiguous (two readings disagree)"] == ["2"]


def test_report_answer_line_gives_the_ambiguous_count_beside_the_score(tmp_path: Path) -> None:
    """Issue 38: the answer a person reads first says how many grades were ambiguous, beside each build's score."""
    base = [{"id": "gsm8k:0", "content": "#### 18"}, {"id": "gsm8k:1", "content": "The answer is 3."}]
    after = [{"id": "gsm8k:0", "content": "The answer is 18.\n\nWait — it is 20."}, base[1]]
    _, s1, run1 = _replay(tmp_path, base, "before")
    _, s2, run2 = _replay(tmp_path, after, "after")
    assert (s1["total"]["ambiguous"], s2["total"]["ambiguous"]) == (0, 1)
    out = tmp_path / "report.md"
    proc = subprocess.run(
        [*EVALKIT, "report", str(run1), str(run2), "--labels", "before,after", "-o", str(out), "--no-html"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    answer = out.read_text().split("## Builds compared", 1)[0]
    # issue #55: sure-correct / N, the unsure count and the interval; the unsure question is can't tell, no loss
    t1, t2 = s1["total"], s2["total"]
    assert (t1["sure_correct"], t1["unsure"], t2["sure_correct"], t2["unsure"]) == (2, 0, 1, 1)
    assert "2/2 → 1/2 (1 unsure, [1, 2]/2) correct; 0 question(s) went right→wrong" in answer, answer
    assert "1 can't tell (unsure in either run)" in answer, answer
