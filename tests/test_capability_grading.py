"""Grading classes as math-verify tests them: one row a case, (gold, answer text, expected outcome, why).

Golds are written inline (a GSM8K `####` number, a MuSR choice list with its answer index), so a new pitfall is
one new row; the same classes run through `--replay` on real dataset ids in cases/capability_hard_cases.py.
"""

from __future__ import annotations

import pytest

from evalkit_evals import gsm8k, musr

GSM8K_SEPARATORS = [  # (gold, answer, expected, why)
    ("1250000", "The answer is $1 250 000.", "correct", "space as thousands separator, currency"),
    ("1250000", "#### 1 250 000", "correct", "space groups after ####"),
    ("36500", "So the total is:\n36 500", "correct", "space groups on the last line"),
    ("36500", "The answer is 36\u2009500 dollars.", "correct", "thin space"),
    ("36500", "The answer is 36\u202f500.", "correct", "narrow no-break space"),
    ("36500", "**Answer:** 36\u00a0500", "correct", "no-break space"),
    ("1250000", "\\boxed{1 250 000}", "correct", "space groups inside boxed"),
    ("500", "She packs 3 500-gram bags.\nThe answer is 500", "correct", "a count before a hyphenated unit"),
    ("3500", "#### 3 5000", "wrong", "malformed space group: 3, not 35000"),
    ("36500", "The answer is 36 50", "wrong", "a two-digit group is no group"),
    ("18", "16 - 3 - 4 = 9 eggs\n#### 18", "correct", "spaced arithmetic is not grouped"),
]

GSM8K_HEDGES = [
    ("15", "The answer is 15 or 20.", "wrong", "two candidates, the first right"),
    ("20", "The answer is 15 or 20.", "wrong", "two candidates, the second right"),
    ("7", "The answer is either 7 or 9.", "wrong", "either ... or"),
    ("9", "So she has either 7 or 9 left", "wrong", "either ... or on the last line"),
    ("15", "#### 15 or 20", "wrong", "hedge after ####"),
    ("15", "The final answer is 15, or maybe 20", "wrong", "comma, or maybe"),
    ("15", "**Answer:** $15 or $20", "wrong", "currency on both candidates"),
    ("15", "The answer is 15, not 20.", "correct", "a rejected alternative is no hedge"),
    ("15", "The answer is 15 or more hours of work? No: exactly 15.\n#### 15", "correct", "#### line decides"),
    ("15", "It takes 15 minutes for 20 people.\nThe answer is 15", "correct", "'for' is not 'or'"),
]

_KITCHEN = ["kitchen", "kitchen drawer", "nightstand", "safety deposit box", "security desk"]
_STAGE = ["Marta's study room", "backstage ", "instrument room", "stage"]
_PEOPLE = ["Mackenzie", "Ana", "Priya"]
_CABIN = [" site manager's cabin", "construction site", "management office ", "storage shed"]
_PANTRY = ["cooking station", "dining tables", "pantry", "pantry ", "upper cabinet"]

MUSR_CHOICE_TEXT = [  # (choices, gold index 0-based, answer, expected, why)
    (_PEOPLE, 2, "ANSWER: Priya", "correct", "exact choice text"),
    (_PEOPLE, 2, "ANSWER: **Priya**", "correct", "bold choice text"),
    (_PEOPLE, 2, 'ANSWER: "Priya"', "correct", "quoted choice text"),
    (_PEOPLE, 2, "ANSWER: The murderer is Priya.", "correct", "choice after 'is'"),
    (_PEOPLE, 2, "ANSWER: 3 (Priya)", "correct", "number with its text in parentheses"),
    (_PEOPLE, 2, "ANSWER: (3) Priya", "correct", "parenthesised number then text"),
    (_PEOPLE, 2, "ANSWER: **3** - Priya", "correct", "bold number, dash, text"),
    (_PEOPLE, 1, "ANSWER: 3 (Priya)", "wrong", "the number decides, and it is wrong"),
    (_PEOPLE, 2, "ANSWER: priya", "correct", "any case"),
    (_PEOPLE, 2, "ANSWER: Priya or Ana", "wrong", "two choices named: a hedge"),
    # Issue 24 reversed this row (was "wrong": two choices named): `X, not Y` names X, as a reader takes it.
    (_PEOPLE, 2, "ANSWER: It was Priya, not Mackenzie.", "correct", "X, not Y: the rejected choice is not named"),
    (_PEOPLE, 2, "The answer is Priya.", "correct", "no ANSWER: label, last line states the answer"),
    (_PEOPLE, 2, "My final answer is **Priya**", "correct", "stated answer in bold"),
    (_PEOPLE, 2, "Priya had the motive and the means.", "unparsed", "named only in prose: no credit"),
    (_PEOPLE, 2, "ANSWER: Pri", "unparsed", "a partial name is no choice"),
    (_PEOPLE, 2, "ANSWER: Priyanka", "unparsed", "a longer word is not the name"),
    (_KITCHEN, 1, "ANSWER: kitchen drawer", "correct", "substring trap: the longer choice"),
    (_KITCHEN, 0, "ANSWER: kitchen drawer", "wrong", "substring trap: not the shorter one"),
    (_KITCHEN, 1, "ANSWER: They would look in the kitchen drawer.", "correct", "longer match wins in a sentence"),
    (_KITCHEN, 0, "ANSWER: They would look in the kitchen.", "correct", "the shorter choice alone"),
    (_KITCHEN, 1, "ANSWER: the kitchen drawer or the nightstand", "wrong", "hedge between two choices"),
    (_STAGE, 2, "ANSWER: instrument room", "correct", "plain"),
    (_STAGE, 1, "ANSWER: backstage", "correct", "gold text with a trailing space"),
    (_STAGE, 3, "ANSWER: backstage", "wrong", "'backstage' does not name 'stage'"),
    (_STAGE, 3, "ANSWER: on the stage", "correct", "'stage' as its own word"),
    (_CABIN, 0, "ANSWER: site manager's cabin", "correct", "gold text with a leading space"),
    (_CABIN, 1, "ANSWER: the construction site", "correct", "'site' inside another choice is not a second name"),
    (_PANTRY, 3, "ANSWER: pantry", "correct", "a choice listed twice (trailing space) is one answer"),
    (_PANTRY, 3, "ANSWER: 3", "correct", "the number of its twin"),
    (_PANTRY, 4, "ANSWER: pantry", "wrong", "another choice entirely"),
]


@pytest.mark.parametrize(
    "gold, answer, expected, why", GSM8K_SEPARATORS + GSM8K_HEDGES, ids=[r[3] for r in GSM8K_SEPARATORS + GSM8K_HEDGES]
)
def test_gsm8k(gold: str, answer: str, expected: str, why: str) -> None:
    verdict = gsm8k.grade({"answer": f"worked solution\n#### {gold}"}, answer)
    assert verdict.outcome == expected, verdict.why


@pytest.mark.parametrize("choices, gold, answer, expected, why", MUSR_CHOICE_TEXT, ids=[r[4] for r in MUSR_CHOICE_TEXT])
def test_musr(choices: list[str], gold: int, answer: str, expected: str, why: str) -> None:
    verdict = musr.grade({"choices": str(choices), "answer_index": gold}, answer)
    assert verdict.outcome == expected, verdict.why


def test_hedges_show_every_candidate() -> None:
    """A hedge's `extracted` holds all it named, so a reader of graded.jsonl sees why it is wrong."""
    assert gsm8k.grade({"answer": "#### 15"}, "The answer is 15 or 20.").extracted == "15 or 20"
    assert musr.grade({"choices": str(_PEOPLE), "answer_index": 2}, "ANSWER: Priya or Ana").extracted == "3 | 2"
