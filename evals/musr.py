"""MuSR: the MuSR authors' numbered-choice prompt (`prompts/musr.j2`) and a final-answer parse a careful human
would agree with.

The answer is read from the last `ANSWER:` line (any case, markdown bold allowed), else from a last line that
states the answer ("The answer is the kitchen drawer."). A number comes first: `ANSWER: 3`, `(3)`, `3 - Priya`,
`3 (Priya)` are choice 3; a number outside 1..n is `unparsed`. Otherwise the text is matched against the choices
(trimmed, any case): its exact text, or exactly one choice named in it (in bold, quotes or after "is"), the longer
match winning where one choice's text holds another's ("kitchen drawer" is not "kitchen"), word boundaries kept
("backstage" does not name "stage"). Two different choices named is `wrong` (a hedge); a choice named only in the
prose, no answer statement, gets no credit, and there is no random fallback. Two choices whose trimmed texts are
equal (a few rows list 'pantry' and 'pantry ') are the same answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from evalkit_evals.prompting import musr_choices
from evalkit_evals.verdict import Verdict

_ANSWER = re.compile(r"answer\s*[:：]\s*(?:\*\*|__)?\s*\(?\s*([^\n]*?)\s*$", re.IGNORECASE | re.MULTILINE)
# A last line that states the answer without the asked-for label: "The answer is X", "My final answer is X".
_STATED = re.compile(r"\banswer\s+(?:is|would be|must be)\s*[:：]?\s*(.+)$", re.IGNORECASE)
_NUMBER = re.compile(r"^\(?(\d+)(?:\).*|\s*[-–—.:]\s*.*|\s*\(.*\)\s*)?$")
_MARKUP = re.compile(r"\*\*|__|`")
_QUOTES = "\"'“”‘’"


@dataclass(frozen=True)
class ChoiceRead:
    """What the final answer names: `choice` (1-based) or None, `hedged` when it names two or more choices."""

    choice: int | None
    how: str
    raw: str | None
    hedged: tuple[int, ...] = ()


def _clean(text: str) -> str:
    text = _MARKUP.sub("", text).strip().rstrip(".!").strip()
    return text.strip(_QUOTES).strip()


def named_choices(text: str, choices: list[str]) -> list[int]:
    """The distinct 1-based choices whose trimmed text appears in `text` as whole words, longest match first
    claiming its span, in order of appearance."""
    low = text.lower()
    spans: list[tuple[int, int, int]] = []
    for i, choice in sorted(enumerate(choices, 1), key=lambda ic: -len(ic[1].strip())):
        needle = choice.strip().lower()
        if not needle:
            continue
        for m in re.finditer(r"(?<!\w)" + re.escape(needle) + r"(?!\w)", low):
            if all(m.end() <= s or m.start() >= e for s, e, _ in spans):
                spans.append((m.start(), m.end(), i))
    return list(dict.fromkeys(i for _, _, i in sorted(spans)))


def _read_text(raw: str, choices: list[str], where: str) -> ChoiceRead:
    text = _clean(raw)
    m = _NUMBER.match(text)
    if m:
        n = int(m.group(1))
        if 1 <= n <= len(choices):
            return ChoiceRead(n, f"choice number {where}", text)
        return ChoiceRead(None, f"choice number {n} outside 1..{len(choices)}", text)
    exact = [i for i, c in enumerate(choices, 1) if c.strip().lower() == text.lower()]
    if len(exact) == 1:
        return ChoiceRead(exact[0], f"exact choice text {where}", text)
    named = named_choices(text, choices)
    if len(named) == 1:
        return ChoiceRead(named[0], f"one choice named {where}", text)
    if len(named) > 1:
        return ChoiceRead(None, f"{len(named)} different choices named {where}", text, tuple(named))
    return ChoiceRead(None, f"{where}: neither a choice number nor a choice's text", text)


def extract(answer: str, choices: list[str]) -> ChoiceRead:
    """The choice the answer's last `ANSWER:` line names, else its last line when that states the answer."""
    hits = list(_ANSWER.finditer(answer))
    if hits:
        return _read_text(hits[-1].group(1), choices, "after ANSWER:")
    lines = [ln for ln in answer.strip().splitlines() if ln.strip()]
    stated = _STATED.search(_MARKUP.sub("", lines[-1])) if lines else None
    if stated:
        return _read_text(stated.group(1), choices, "in the last line's 'answer is'")
    return ChoiceRead(None, "no 'ANSWER:' line", None)


def grade(row: dict, answer: str) -> Verdict:
    """Right when the chosen number is `answer_index + 1`; a hedge between choices is wrong."""
    choices = musr_choices(row)
    gold = int(row["answer_index"]) + 1
    read = extract(answer, choices)
    gold_text = f"gold {gold} ({choices[gold - 1].strip()!r})"
    if read.hedged:
        named = ", ".join(f"{i} ({choices[i - 1].strip()!r})" for i in read.hedged)
        return Verdict("wrong", " | ".join(str(i) for i in read.hedged), f"{read.how}: {named}; {gold_text}")
    if read.choice is None:
        return Verdict("unparsed", read.raw, read.how)
    n = read.choice
    # Some rows list one place twice, once with a trailing space ('pantry', 'pantry '): the same answer.
    same = n == gold or choices[n - 1].strip().lower() == choices[gold - 1].strip().lower()
    return Verdict("correct" if same else "wrong", str(n),
                   f"{read.how}: {n} ({choices[n - 1].strip()!r}), {gold_text}")
