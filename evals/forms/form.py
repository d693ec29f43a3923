"""What an answer form is: a named way of writing one part of an answer (a marker, a notation, a trailing text, a
reasoning channel, a choice form, a code form), and how a careful reader reads what it writes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

# How a careful reader reads a form's text (the expectation the property tests check):
VALUE = "value"  # the value written: the gold grades correct, the near-miss wrong
AMBIGUOUS = "ambiguous"  # two values stand as the answer: `ambiguous: true`, both readings recorded
NO_ANSWER = "no_answer"  # the answer was withdrawn and none replaces it: `unparsed`

FAMILIES = ("marker", "notation", "trailing", "channel", "choice", "code")
KINDS = ("number", "math", "choice", "code")


@dataclass(frozen=True)
class Subject:
    """What an answer is about. `value` is written as the answer and `other` is the competing value a correction
    or a rejected draft names (numbers and LaTeX as text; choices as their 1-based number; code as a function
    body). `work` are numbers of the working that checks and drafts restate."""

    kind: str
    value: str
    other: str
    choices: tuple[str, ...] = ()
    prompt: str = ""
    entry_point: str = ""
    work: tuple[int, int] = (7, 9)

    def text_of(self, number: str) -> str:
        """A choice's text by its 1-based number, trimmed."""
        return self.choices[int(number) - 1].strip()


@dataclass(frozen=True)
class Form:
    """One named form. `write(subject, text)` returns the text with the form applied, or None when the form does
    not apply to this subject (a thousands separator on 42); what `text` is depends on the family: the value for a
    notation, the notated value for a marker or choice form, the answer so far for a trailing text or a channel,
    nothing for a code form. `reads` says how a careful reader reads the result."""

    name: str
    family: str
    kinds: frozenset[str]
    write: Callable[[Subject, str], str | None]
    reads: str = VALUE
    example: str = ""

    def applies(self, kind: str) -> bool:
        """Whether the form is written for answers of this kind."""
        return kind in self.kinds


def kinds(*names: str) -> frozenset[str]:
    """A form's kinds, checked against KINDS."""
    assert set(names) <= set(KINDS), names
    return frozenset(names)
