"""Composing forms into one answer (a notation × a marker × a trailing text × a reasoning channel, or a choice or
code form in the marker's place), and the gold and near-miss subjects of a question."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, replace
from decimal import Decimal, InvalidOperation

from evalkit_evals.forms.form import AMBIGUOUS, NO_ANSWER, VALUE, Form, Subject

# The slots an answer of each kind is written through, innermost first.
SLOTS: dict[str, tuple[str, ...]] = {
    "number": ("notation", "marker", "trailing", "channel"),
    "math": ("notation", "marker", "trailing", "channel"),
    "choice": ("choice", "trailing", "channel"),
    "code": ("code", "trailing", "channel"),
}
# The partner each slot falls back to when a drawn one does not apply to the value.
PLAIN = {
    "notation": "plain",
    "marker": "answer_is",
    "trailing": "nothing",
    "channel": "no_channel",
    "choice": "choice_number",
    "code": "code_fenced",
}


@dataclass(frozen=True)
class Written:
    """One composed answer: its text, the forms that wrote it (slot → name) and how a careful reader reads it."""

    text: str
    forms: dict[str, str]
    reads: str


def compose(subject: Subject, forms: dict[str, Form]) -> Written | None:
    """The answer `subject` written through one form per slot of its kind; None when a form does not apply to it
    (or when two forms that are not plain readings are combined: their joint reading is no one form's to state)."""
    slots = SLOTS[subject.kind]
    if set(forms) != set(slots) or any(not f.applies(subject.kind) for f in forms.values()):
        return None
    unusual = {f.reads for f in forms.values()} - {VALUE}
    if len(unusual) > 1 or sum(f.reads != VALUE for f in forms.values()) > 1:
        return None
    s = subject
    if "notation" in forms:
        value, other = forms["notation"].write(s, s.value), forms["notation"].write(s, s.other)
        if value is None or other is None:
            return None
        s = replace(s, value=value, other=other)
    head = forms[slots[0] if slots[0] != "notation" else "marker"]
    text = head.write(s, s.value)
    for slot in ("trailing", "channel"):
        if text is None:
            return None
        text = forms[slot].write(s, text)
    if text is None:
        return None
    reads = AMBIGUOUS if AMBIGUOUS in unusual else NO_ANSWER if NO_ANSWER in unusual else VALUE
    return Written(text, {k: f.name for k, f in forms.items()}, reads)


def compositions(kind: str, catalogue: tuple[Form, ...], rng: random.Random) -> list[tuple[Form, dict[str, Form]]]:
    """For every form of `kind`, one composition with it in its slot and plain-reading partners drawn by `rng`."""
    by_slot = {slot: [f for f in catalogue if f.family == slot and f.applies(kind)] for slot in SLOTS[kind]}
    out = []
    for slot, forms in by_slot.items():
        for form in forms:
            partners = {
                other: rng.choice([f for f in by_slot[other] if f.reads == VALUE]) for other in by_slot if other != slot
            }
            out.append((form, {slot: form, **partners}))
    return out


def plain_partners(combo: dict[str, Form], slot: str, catalogue: tuple[Form, ...]) -> dict[str, Form]:
    """The composition with the form in `slot` kept and every other slot's form the plain one (`PLAIN`), for a
    tested form that does not apply beside the partners drawn."""
    names = {f.name: f for f in catalogue}
    return {s: f if s == slot else names[PLAIN[s]] for s, f in combo.items()}


def near_number(gold: str) -> str:
    """A near-miss of a number: one more (one less below zero; twelve more for a small multiple of twelve, so a
    dozen stays writable)."""
    d = Decimal(gold)
    if d == d.to_integral_value() and d > 0 and d % 12 == 0 and d <= 132:
        d += 12
    else:
        d += -1 if d < 0 else 1
    return format(d.normalize(), "f") if d == d.to_integral_value() else str(d)


_TEXT_GOLD = re.compile(r"^\\text\{([^{}]*)\}$")


def near_math(gold: str) -> str:
    """A near-miss of a LaTeX answer: its first integer plus one (`\\frac{1}{4}` → `\\frac{2}{4}`); a text answer
    becomes another word."""
    text = _TEXT_GOLD.match(gold.strip())
    if text:
        word = text.group(1).strip()
        return "\\text{" + ("north" if word.lower() != "north" else "south") + "}"
    m = re.search(r"\d+", gold)
    if m is None:
        return "-97531"
    return gold[: m.start()] + str(int(m.group()) + 1) + gold[m.end() :]


def number_text(value: Decimal | str) -> str:
    """A number as plain text (`18`, `2.5`, `-3`)."""
    try:
        d = Decimal(str(value))
    except InvalidOperation:
        return str(value)
    return format(d.normalize(), "f") if d == d.to_integral_value() else str(d)
