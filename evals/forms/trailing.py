"""Trailing forms: what follows the final answer (a verification paragraph, "Let me double-check", a
parenthetical computation, a pleasantry, a correction after the answer, a re-check of the wording that changes the
answer or confirms it, a retraction with no new answer)."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from evalkit_evals.forms.form import AMBIGUOUS, NO_ANSWER, Form, Subject, kinds
from evalkit_evals.forms.markers import inline


def _other(s: Subject) -> str:
    return s.text_of(s.other) if s.kind == "choice" else inline(s, s.other)


def _same(s: Subject) -> str:
    return s.text_of(s.value) if s.kind == "choice" else inline(s, s.value)


def _parenthetical(s: Subject, text: str) -> str | None:
    try:
        doubled = Decimal(s.value) * 2
    except InvalidOperation:
        return None  # a notated value ("two dozen"): no computation to write after it
    if not text.endswith(s.value):
        return None
    return f"{text} ({format(doubled.normalize(), 'f')} ÷ 2)"


ALL = kinds("number", "math", "choice", "code")
VALUES = kinds("number", "math", "choice")
TRAILING: tuple[Form, ...] = (
    Form("nothing", "trailing", ALL, lambda s, t: t, example=""),
    Form(
        "verification",
        "trailing",
        kinds("number", "math"),
        lambda s, t: (
            f"{t}\n\nVerification: {s.work[0]} × {s.work[1]} = {s.work[0] * s.work[1]}, and "
            f"{s.work[1]} + {s.work[0]} = {s.work[0] + s.work[1]}. ✓"
        ),
        example="Verification: 7 × 9 = 63, and 9 + 7 = 16. ✓",
    ),
    Form(
        "double_check",
        "trailing",
        kinds("number", "math"),
        lambda s, t: (
            f"{t}\n\nLet me double-check: {s.work[0]} × {s.work[1]} = {s.work[0] * s.work[1]}, "
            f"which matches the working above."
        ),
        example="Let me double-check: 7 × 9 = 63, which matches the working above.",
    ),
    Form("parenthetical", "trailing", kinds("number"), _parenthetical, example="14 (28 ÷ 2)"),
    Form(
        "pleasantry",
        "trailing",
        ALL,
        lambda s, t: f"{t}\n\nI hope this helps! Let me know if you have any other questions.",
        example="I hope this helps!",
    ),
    Form(
        "restated",
        "trailing",
        VALUES,
        lambda s, t: f"{t}\n\nTo confirm, the answer is {_same(s)}.",
        example="To confirm, the answer is 42.",
    ),
    Form(
        "correction_after",
        "trailing",
        VALUES,
        lambda s, t: f"{t}\n\nWait — it is {_other(s)}.",
        reads=AMBIGUOUS,
        example="\\boxed{42}\\n\\nWait — it is 12.",
    ),
    Form(
        "recheck_changes",
        "trailing",
        VALUES,
        lambda s, t: (
            f"{t}\n\nDouble-checking the wording: it asks for something else, so the answer should be {_other(s)}."
        ),
        reads=AMBIGUOUS,
        example="Double-checking the wording: it asks for something else, so the answer should be 12.",
    ),
    Form(
        "recheck_confirms",
        "trailing",
        VALUES,
        lambda s, t: f"{t}\n\nDouble-checking the wording: it asks for exactly this, so the answer is {_same(s)}.",
        example="Double-checking the wording: it asks for exactly this, so the answer is 42.",
    ),
    Form(
        "retraction",
        "trailing",
        VALUES,
        lambda s, t: f"{t}\n\nWait, that's not right.",
        reads=NO_ANSWER,
        example="The answer is 42.\\n\\nWait, that's not right.",
    ),
    Form(
        "code_explanation",
        "trailing",
        kinds("code"),
        lambda s, t: (
            f"{t}\n\nThe function walks the input once, so it runs in linear time; for example "
            f"`{s.entry_point}` handles the empty input first."
        ),
        example="The function walks the input once ...",
    ),
)
