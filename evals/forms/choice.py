"""Choice forms (MuSR and `choice` user evals): how a model names its choice (its text alone, its number alone,
both agreeing, both contradicting, boxed, a prose conclusion with no connective, a table, an empty `ANSWER:` then
bullets, the text in another spelling or spacing)."""

from __future__ import annotations

import re

from evalkit_evals.forms.form import AMBIGUOUS, Form, Subject, kinds

CHOICE = kinds("choice")
_LEAD = "Weighing every clue in the story, one option fits the timeline and the motives."


def _respaced(s: Subject, n: str) -> str | None:
    # "toy box" as "toybox", "Lost and Found box" as "lost-and-found box": only short texts (a team allocation's
    # roles are no spelling variant), only where every other choice stays distinct.
    text = s.text_of(n)
    if ":" in text or len(text.split()) > 4:
        return None
    variant = text.replace(" ", "", 1) if " " in text else None
    if variant is None:
        return None
    squashed = {re.sub(r"\W", "", c.lower()) for i, c in enumerate(s.choices, 1) if str(i) != n}
    return None if re.sub(r"\W", "", variant.lower()) in squashed else variant


def _table(s: Subject, n: str) -> str:
    rows = "\n".join(f"| {i} | {c.strip()} | {'yes' if str(i) == n else 'no'} |" for i, c in enumerate(s.choices, 1))
    return f"{_LEAD}\n\n| # | option | fits every clue |\n|---|---|---|\n{rows}\n\n**ANSWER: {n}**"


CHOICES: tuple[Form, ...] = (
    Form("choice_number", "choice", CHOICE, lambda s, n: f"{_LEAD}\n\nANSWER: {n}", example="ANSWER: 2"),
    Form("choice_text", "choice", CHOICE, lambda s, n: f"{_LEAD}\n\nANSWER: {s.text_of(n)}", example="ANSWER: Mia"),
    Form(
        "choice_both",
        "choice",
        CHOICE,
        lambda s, n: f"{_LEAD}\n\nANSWER: {n} ({s.text_of(n)})",
        example="ANSWER: 2 (Mia)",
    ),
    Form(
        "choice_contradicting",
        "choice",
        CHOICE,
        lambda s, n: f"{_LEAD}\n\nANSWER: {n} ({s.text_of(s.other)})",
        reads=AMBIGUOUS,
        example="ANSWER: 2 (Ana), Ana being choice 1",
    ),
    Form("choice_boxed", "choice", CHOICE, lambda s, n: f"{_LEAD}\n\n$\\boxed{{{n}}}$", example="$\\boxed{2}$"),
    Form(
        "choice_prose",
        "choice",
        CHOICE,
        lambda s, n: f"{_LEAD}\n\n{s.text_of(n)} is the option that fits every clue.",
        example="Mia is the option that fits every clue.",
    ),
    Form("choice_table", "choice", CHOICE, _table, example="| 2 | Mia | yes |"),
    Form(
        "choice_empty_answer_bullets",
        "choice",
        CHOICE,
        lambda s, n: f"{_LEAD}\n\nANSWER:\n- {s.text_of(n)}\n- it fits the timeline and the motive",
        example="ANSWER:\\n- Mia\\n- it fits the timeline",
    ),
    Form(
        "choice_respaced",
        "choice",
        CHOICE,
        lambda s, n: None if (v := _respaced(s, n)) is None else f"{_LEAD}\n\nANSWER: {v}",
        example="ANSWER: toybox (for 'toy box')",
    ),
    Form(
        "choice_answer_is",
        "choice",
        CHOICE,
        lambda s, n: f"{_LEAD}\n\nThe answer is {s.text_of(n)}.",
        example="The answer is Mia.",
    ),
    Form(
        "choice_option_number",
        "choice",
        CHOICE,
        lambda s, n: f"{_LEAD}\n\nANSWER: Option {n}: {s.text_of(n)}",
        example="ANSWER: Option 2: Mia",
    ),
)
