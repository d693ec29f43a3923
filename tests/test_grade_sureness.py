"""Issue #55: several independent readings, one grade that says whether it is sure; an end of turn ends the answer
and a loop is read up to where it starts; the two regressions of the round before it (a re-check paragraph that
changes the answer, a pytest module after a solution). Every case is graded by the real Grader on real items."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalkit_evals.answer_end import end_of_turn, loop_start, up_to_loop
from evalkit_evals.code_judge import CodeJudge
from evalkit_evals.datasets import DatasetItem, load_items
from evalkit_evals.grader import Grader
from evalkit_evals.isolation import Isolation, find_bubblewrap
from evalkit_evals.musr import musr_choices
from evalkit_evals.sureness import Found, Strength, decide
from evalkit_evals.verdict import Verdict


@pytest.fixture(scope="module")
def grader(data_dir: Path) -> Iterator[Grader]:
    found = find_bubblewrap()
    g = Grader(data_dir, CodeJudge(found if isinstance(found, Isolation) else Isolation("none")))
    yield g
    g.close()


@pytest.fixture(scope="module")
def items(data_dir: Path) -> dict[str, DatasetItem]:
    out = {}
    for ds in ("gsm8k", "math500", "musr", "humanevalplus"):
        out.update({it.qid: it for it in load_items(ds, data_dir)})
    return out


def _values(v: Verdict) -> set[str | None]:
    """Every value read: by every reader, and the rules' disagreeing pair."""
    return {r.value for r in (*v.every, *v.readings)}


# --- regression 1: a "Double-checking the wording" paragraph that changes the answer is not a check line -----------
@pytest.mark.parametrize(
    "tail",
    [
        "Double-checking the wording: she eats three, so the answer should be 20.",
        "Double-checking the wording: the question asks per week, so it is 126 instead.",
        "Let me double-check the wording. It asks for the total, so the total is $20.",
    ],
)
def test_a_recheck_that_changes_the_answer_is_graded_by_the_change_and_unsure(
    tail: str, grader: Grader, items: dict[str, DatasetItem]
) -> None:
    it = items["gsm8k:0"]  # gold 18
    v = grader.grade(it, f"Janet sells 9 eggs at $2 each.\n\nThe answer is 18.\n\n{tail}")
    assert v.outcome == "wrong" and v.sure is False, v
    assert "18" in _values(v) and any(r.strength == "later" and r.value != "18" for r in v.every)
    assert len({r.value for r in v.readings}) == 2  # the withdrawn value and the change, both on the line


def test_a_recheck_that_confirms_the_answer_stays_sure(grader: Grader, items: dict[str, DatasetItem]) -> None:
    it = items["gsm8k:0"]
    v = grader.grade(it, "The answer is 18.\n\nDouble-checking the wording: 9 eggs × $2 = $18, so it is 18.")
    assert v.outcome == "correct" and v.sure is True, v
    v = grader.grade(it, "#### 18\n\nCheck: 16 - 3 - 4 = 9 and 9 × 2 = 18 ✓")
    assert v.outcome == "correct" and v.sure is True, v


def test_a_recheck_that_changes_a_choice(grader: Grader, items: dict[str, DatasetItem]) -> None:
    it = items["musr:murder_mysteries/0"]
    choices, gold = musr_choices(it.row), int(it.row["answer_index"]) + 1
    other = gold % len(choices) + 1
    text = f"ANSWER: {other}\n\nWait, re-reading the clues: the answer is {gold}."
    v = grader.grade(it, text)
    assert v.sure is False and {str(gold), str(other)} <= _values(v), v


# --- regression 2: a pytest module after a solution is not merged into it --------------------------------------
def test_a_pytest_module_after_the_solution_is_not_merged(grader: Grader, items: dict[str, DatasetItem]) -> None:
    it = items["humanevalplus:HumanEval/0"]
    solution = it.row["prompt"] + it.row["canonical_solution"]
    tests = (
        "import pytest\nfrom solution import has_close_elements\n\n\n"
        "def test_close():\n    assert has_close_elements([1.0, 2.0, 2.05], 0.1)\n"
    )
    text = f"```python\n{solution}\n```\n\nAnd the tests:\n\n```python\n{tests}```\n"
    v = grader.grade(it, text)
    assert v.outcome == "correct" and v.sure is True, v.why
    assert "import pytest" not in str(v.extracted) and "from solution" not in str(v.extracted)


def test_two_different_complete_solutions_are_unsure_when_the_last_is_broken(
    grader: Grader, items: dict[str, DatasetItem]
) -> None:
    it = items["humanevalplus:HumanEval/0"]
    solution = it.row["prompt"] + it.row["canonical_solution"]
    broken = (
        "from typing import List\n\ndef has_close_elements(numbers: List[float], threshold: float) -> bool:\n    for"
    )
    v = grader.grade(it, f"```python\n{solution}\n```\n\nShorter:\n\n```python\n{broken}\n```\n")
    assert v.sure is False, v


# --- item 4: an end of turn ends the answer; a loop is read up to its start ------------------------------------
@pytest.mark.parametrize("token", ["<|im_end|>", "<|eot_id|>", "<|end|>", "</s>", "<|endoftext|>", "<end_of_turn>"])
def test_text_after_an_end_of_turn_is_never_graded(token: str, grader: Grader, items: dict[str, DatasetItem]) -> None:
    it = items["gsm8k:0"]
    v = grader.grade(it, f"#### 18{token}\n<|im_start|>user\nAre you sure?\n<|im_start|>assistant\n#### 20")
    assert v.outcome == "correct" and v.sure is True, v
    assert "20" not in _values(v)


def test_harmony_channels_are_not_an_end_of_turn(grader: Grader, items: dict[str, DatasetItem]) -> None:
    text = "<|channel|>analysis<|message|>maybe 20<|end|><|start|>assistant<|channel|>final<|message|>#### 18<|return|>"
    assert end_of_turn(text).endswith("#### 18")
    v = grader.grade(items["gsm8k:0"], text)
    assert v.outcome == "correct" and v.sure is True, v


def test_a_loop_to_the_length_limit_is_read_up_to_the_loop(grader: Grader, items: dict[str, DatasetItem]) -> None:
    it = items["gsm8k:0"]
    loop = "So the answer is 18. Let me recompute: 16 - 3 - 4 = 9. " * 40
    text = "She has 9 eggs left at $2 each.\n\n" + loop + "So the ans"
    cut = loop_start(text)
    assert cut is not None and text[:cut].count("Let me recompute") == 1
    v = grader.grade(it, text, "length")
    assert v.outcome == "correct", v
    assert up_to_loop("no loop here, 1 2 3") == "no loop here, 1 2 3"
    # a loop that repeats a wrong number to the end is still read once, and a cut wrong answer is truncated
    v = grader.grade(it, "The answer is 20. " * 50, "length")
    assert v.outcome == "truncated"


# --- item 1: fallbacks alone are never sure; the strongest readings must agree ----------------------------------
def test_a_fallback_alone_is_never_sure(grader: Grader, items: dict[str, DatasetItem]) -> None:
    v = grader.grade(items["gsm8k:0"], "So she makes $18 every day.")
    assert v.outcome == "correct" and v.sure is False
    assert [r.strength for r in v.every if r.value is not None] == ["rules", "fallback"]


def test_decide_needs_the_strongest_readings_to_agree() -> None:
    v = Verdict("correct", "18", "", rule="gsm8k.hash_line")
    agree = [
        Found("number.hash", Strength.MARKER, "18", "18", True),
        Found("number.label", Strength.MARKER, "18", "18"),
    ]
    assert decide(v, agree, "18").sure
    split = [agree[0], Found("number.label", Strength.MARKER, "20", "20", False)]
    assert not decide(v, split, "18").sure
    weaker = [agree[0], Found("number.last_line", Strength.FALLBACK, "20", "20", False)]
    assert decide(v, weaker, "18").sure  # a weaker reading does not outvote a marker
    later = [*agree, Found("number.recheck", Strength.LATER, "20", "20", False, at=99)]
    d = decide(v, later, "18")
    assert not d.sure and d.follows is not None and d.follows.value == "20"


def test_graded_lines_carry_sure_and_readings_through_replay(tmp_path: Path) -> None:
    answers = [
        {"id": "gsm8k:0", "content": "#### 18"},
        {"id": "gsm8k:0", "content": "So she makes $18 every day."},
        {"id": "gsm8k:0", "content": "#### 18<|im_end|><|im_start|>assistant\n#### 20"},
    ]
    src = tmp_path / "answers.jsonl"
    src.write_text("".join(json.dumps(a) + "\n" for a in answers), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "evalkit", "capability", "--replay", str(src), "--out", str(tmp_path), "--name", "s"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    run = Path(proc.stdout.strip().splitlines()[-1])
    graded = [json.loads(ln) for ln in (run / "graded.jsonl").read_text().splitlines()]
    assert [g["sure"] for g in graded] == [True, False, True]
    assert all(g["readings"] and {"rule", "value", "strength"} <= set(g["readings"][0]) for g in graded)
    total = json.loads((run / "summary.json").read_text())["total"]
    assert (total["correct"], total["sure_correct"], total["unsure"]) == (3, 2, 1)
    assert total["interval"] == [round(2 / 3, 4), 1.0]


def test_the_served_model_as_extractor_settles_unsure_lines(sim, tmp_path: Path) -> None:
    """Item 3: `--judge-self` asks the served model itself (here the sim) for the final answer of each unsure line
    with the fixed extraction prompt at temperature 0; evalkit's rules grade what it read, stored as `judge` with
    `extractor: true`, and that settles the line. Sure lines are never sent."""
    rows = [{"id": f"r{i}", "q": f"question {i}", "gold": str(g)} for i, g in enumerate([12, 48, 7])]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (tmp_path / "fallback.toml").write_text(
        'name = "fallback"\nanswer = "gold"\nprompt = "{{ q }}"\n[dataset]\npath = "rows.jsonl"\nid_column = "id"\n'
        '[extract]\nkind = "number"\n[sim]\nanswer = """{% if id == "r2" %}#### {{ answer }}{% else %}'
        'Working it out, the count comes to {{ answer }} in the end.{% endif %}"""\n',
        encoding="utf-8",
    )
    s = sim("--port", "0", "--time-scale", "1000", "--eval", str(tmp_path / "fallback.toml"))
    cmd = [sys.executable, "-m", "evalkit", "capability", "--base-url", s.base_url, "--thinking", "off"]
    cmd += ["--eval", str(tmp_path / "fallback.toml"), "--judge-self", "--out", str(tmp_path), "--name", "self"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run = Path(proc.stdout.strip().splitlines()[-1])
    graded = {g["id"]: g for g in (json.loads(ln) for ln in (run / "graded.jsonl").read_text().splitlines())}
    assert graded["fallback:r2"]["sure"] is True and "judge" not in graded["fallback:r2"]
    for qid in ("fallback:r0", "fallback:r1"):
        g = graded[qid]
        assert g["sure"] is False and g["judge"]["extractor"] is True and g["judge"]["settles"] is True, g
        assert g["judge"]["verdict"] == "correct" and "comes to" in g["judge"]["words"]
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["judge"]["extractor"] is True and manifest["judge"]["prompt"] == "extract-answer.txt"
    total = json.loads((run / "summary.json").read_text())["total"]
    assert (total["sure_correct"], total["unsure"]) == (3, 0)  # the extractor settled both unsure lines


@pytest.mark.parametrize(
    "text, outcome, sure",
    [
        ("Janet sells 9 eggs at $2 = $18.\nA: 18", "correct", True),  # a transcript's answer line is a marker
        ('{"reasoning": "9 eggs at $2", "answer": "She makes $18 every day."}', "correct", True),  # JSON in prose
        ('{"reasoning": "...", "answer": "Over 18 hours"}', "correct", False),  # a bound, not a value
        ('{"answer": "16 - 3 - 4 = 9 eggs, 9 eggs * $2 = $18"}', "wrong", False),  # the chain goes on to 18
        ('{"answer": "She makes $18, or $20 with tips."}', "wrong", False),  # a hedge: the rules say wrong
        ('{"answer": "Cannot be determined"}', "unparsed", True),  # says it has no answer: surely none
        ('{"answer": "Nancy gets 18"}', "correct", True),  # a name is no "NaN"
    ],
)
def test_real_answer_forms(text: str, outcome: str, sure: bool, grader: Grader, items: dict[str, DatasetItem]) -> None:
    """Forms of the real-answer corpus (tests/data/real_answers): what is read, and whether that is sure."""
    v = grader.grade(items["gsm8k:0"], text)
    assert (v.outcome, v.sure) == (outcome, sure), (v.why, v.sure_why, v.every)


def test_math_readings_agree_by_value_not_by_spelling(grader: Grader, items: dict[str, DatasetItem]) -> None:
    it = items["math500:test/precalculus/807.json"]
    v = grader.grade(it, '"The maximum is $\\boxed{\\frac{512}{27}}$.",\n"answer": "512/27"')
    assert v.sure is True and {r.value for r in v.every if r.strength == "marker"} >= {"\\frac{512}{27}", "512/27"}


def _replay_run(tmp_path: Path, answers: list[dict[str, str]], name: str) -> Path:
    src = tmp_path / f"{name}.jsonl"
    src.write_text("".join(json.dumps(a) + "\n" for a in answers), encoding="utf-8")
    cmd = [sys.executable, "-m", "evalkit", "capability", "--replay", str(src), "--out", str(tmp_path), "--name", name]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return Path(proc.stdout.strip().splitlines()[-1])


def test_the_report_counts_unsure_questions_as_cant_tell_and_names_a_changed_answer_style(
    tmp_path: Path, items: dict[str, DatasetItem]
) -> None:
    """Item 2: a build whose answers are all right but read only by a fallback is not 'worse': its questions are
    can't tell, its score the interval, and its unsure share moving beyond noise is 'answer style changed'."""
    ids = [f"gsm8k:{i}" for i in range(8)]
    gold = {q: items[q].row["answer"].split("####")[-1].strip().replace(",", "") for q in ids}
    before = _replay_run(tmp_path, [{"id": q, "content": f"#### {gold[q]}"} for q in ids], "before")
    after = _replay_run(tmp_path, [{"id": q, "content": f"So the result is {gold[q]}."} for q in ids], "after")
    out = tmp_path / "report.md"
    cmd = [sys.executable, "-m", "evalkit", "report", str(before), str(after), "--labels", "before,after"]
    proc = subprocess.run([*cmd, "-o", str(out), "--no-html"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    answer = out.read_text().split("## Builds compared", 1)[0]
    assert "8/8 → 0/8 (8 unsure, [0, 8]/8) correct" in answer, answer
    assert "0 question(s) went right→wrong, 0 wrong→right, 8 can't tell" in answer, answer
    assert "answer style changed: unsure 0 → 8 of 8" in answer, answer
