"""Every reader that applies, for any item (issue #55): which reader family reads an item's answers (`read_number`
for GSM8K and `number` user evals, `read_math` for MATH-500 and `math`, `read_choice` for MuSR and `choice`,
`read_code` for HumanEval+), and `judged(...)`: the rules' verdict with every reading and the sure/unsure claim of
`sureness.decide`. Items no family reads (a `regex` or `code` user eval) have one reading, the rule's own: sure
when it read a value."""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from evalkit_evals import read_choice, read_code, read_math, read_number, registry
from evalkit_evals.datasets import DatasetItem
from evalkit_evals.protocol import Judges
from evalkit_evals.sureness import Found, Strength, with_decision
from evalkit_evals.verdict import Verdict

if TYPE_CHECKING:
    from evalkit_evals.humanevalplus import HumanEvalRow


def _user_kind(item: DatasetItem) -> tuple[str, Any] | None:
    spec = getattr(registry.get(item.dataset), "spec", None)
    return None if spec is None else (spec.extract.kind, spec)


def _number(answer: str, verdict: Verdict, gold: Decimal | None, question: str) -> Verdict:
    found = read_number.readings(answer, question, gold)
    verdict_key = verdict.extracted if verdict.outcome in ("correct", "wrong", "truncated") else None
    if verdict.rule.endswith("hedge"):
        verdict_key = f"hedge:{verdict.extracted}"

    def rescore(f: Found) -> Verdict:
        ok = gold is not None and f.value is not None and Decimal(f.value) == gold
        return Verdict("correct" if ok else "wrong", f.value, f"{f.rule}: read {f.value}", rule=verdict.rule)

    return with_decision(verdict, found, verdict_key, rescore)


def _choice(answer: str, verdict: Verdict, choices: list[str], gold: int) -> Verdict:
    found = read_choice.readings(answer, choices, gold)
    verdict_key = None
    if verdict.extracted is not None and verdict.extracted.isdigit() and verdict.outcome != "unparsed":
        verdict_key = read_choice.key(choices, int(verdict.extracted))
    elif verdict.rule.endswith("hedge"):
        verdict_key = f"hedge:{verdict.extracted}"

    def rescore(f: Found) -> Verdict:
        return Verdict("correct" if f.correct else "wrong", f.value, f"{f.rule}: choice {f.value}", rule=verdict.rule)

    return with_decision(verdict, found, verdict_key, rescore)


def _math(answer: str, verdict: Verdict, gold: str, judges: Judges) -> Verdict:
    found = read_math.readings(answer, gold, judges.math)
    verdict_key = None
    if verdict.outcome in ("correct", "wrong", "truncated") and verdict.extracted is not None:
        same = [f for f in found if f.value is not None and f.value.strip() == str(verdict.extracted).strip()]
        verdict_key = (
            same[0].key if same else read_math.verdict_key(str(verdict.extracted), verdict.correct, gold, judges.math)
        )

    def rescore(f: Found) -> Verdict:
        return Verdict("correct" if f.correct else "wrong", f.value, f"{f.rule}: read {f.value}", rule=verdict.rule)

    return with_decision(verdict, found, verdict_key, rescore)


def judged(item: DatasetItem, answer: str, verdict: Verdict, judges: Judges) -> Verdict:
    """The verdict with `every` reading and `sure` set (`sureness.decide`)."""
    row = item.row
    if item.dataset == "gsm8k":
        from evalkit_evals.gsm8k import EVAL as GSM8K
        from evalkit_evals.gsm8k import gold_answer

        return _number(answer, verdict, gold_answer(GSM8K.row(item)), row.get("question") or "")
    if item.dataset == "musr":
        from evalkit_evals.musr import EVAL as MUSR
        from evalkit_evals.musr import musr_choices

        return _choice(answer, verdict, musr_choices(MUSR.row(item)), int(row["answer_index"]) + 1)
    if item.dataset == "math500":
        return _math(answer, verdict, str(row["answer"]), judges)
    if item.dataset == "humanevalplus":
        from evalkit_evals.humanevalplus import EVAL as HUMANEVALPLUS

        return _code(answer, verdict, HUMANEVALPLUS.row(item))
    user = _user_kind(item)
    if user is not None:
        kind, spec = user
        gold = row[spec.answer]
        if kind == "number":
            from evalkit_evals.gsm8k import to_decimal

            return _number(answer, verdict, to_decimal(str(gold)), "")
        if kind == "math":
            return _math(answer, verdict, str(gold), judges)
        if kind == "choice":
            from evalkit_evals.user_eval import _choices

            choices = _choices(row[spec.extract.choices])
            right = (
                int(gold) + 1
                if isinstance(gold, int)
                else next((i + 1 for i, c in enumerate(choices) if c.strip() == str(gold).strip()), 0)
            )
            return _choice(answer, verdict, choices, right)
    return _single(verdict)


def _code(answer: str, verdict: Verdict, row: HumanEvalRow) -> Verdict:
    found, graded = read_code.readings(answer, row["prompt"], row["entry_point"])
    return with_decision(verdict, found, graded if verdict.outcome != "unparsed" else None)


def _single(verdict: Verdict) -> Verdict:
    only = Found(verdict.rule or "rule", Strength.MARKER, verdict.extracted, verdict.extracted, verdict.correct)
    return with_decision(verdict, [only] if verdict.extracted is not None else [], verdict.extracted)
