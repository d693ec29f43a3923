"""The gold and near-miss subjects of a question: what the property tests write in every form."""

from __future__ import annotations

from typing import Any

from evalkit_evals.datasets import DatasetItem
from evalkit_evals.forms.compose import near_math, near_number, number_text
from evalkit_evals.forms.form import Subject

NEAR_MISS_BODY = "    return None\n"  # a body that fits every signature and fails every HumanEval+ task


def _work(qid: str) -> tuple[int, int]:
    # Working numbers that vary by question (so checks restate different numbers), stable across runs.
    h = sum(map(ord, qid))
    return 3 + h % 7, 11 + h % 13


def pair(kind: str, gold: str, near: str, qid: str = "", **extra: Any) -> tuple[Subject, Subject]:
    """(the gold written, the near-miss written), each naming the other as its competing value."""
    w = _work(qid)
    return Subject(kind, gold, near, work=w, **extra), Subject(kind, near, gold, work=w, **extra)


def for_item(item: DatasetItem) -> tuple[Subject, Subject]:
    """The gold and near-miss subjects of a built-in dataset's question."""
    row = item.row
    if item.dataset == "gsm8k":
        from evalkit_evals.gsm8k import EVAL as GSM8K
        from evalkit_evals.gsm8k import gold_answer

        gold = number_text(gold_answer(GSM8K.row(item)))
        return pair("number", gold, near_number(gold), item.qid)
    if item.dataset == "math500":
        gold = row["answer"].strip()
        return pair("math", gold, near_math(gold), item.qid)
    if item.dataset == "musr":
        from evalkit_evals.musr import EVAL as MUSR
        from evalkit_evals.musr import musr_choices

        choices = tuple(musr_choices(MUSR.row(item)))
        gold_n = int(row["answer_index"]) + 1
        return pair("choice", str(gold_n), str(gold_n % len(choices) + 1), item.qid, choices=choices)
    if item.dataset == "humanevalplus":
        return pair(
            "code",
            row["canonical_solution"],
            NEAR_MISS_BODY,
            item.qid,
            prompt=row["prompt"],
            entry_point=row["entry_point"],
        )
    raise ValueError(f"no subjects for dataset {item.dataset!r}")
