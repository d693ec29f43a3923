"""GSM8K: the prompt is `prompts/gsm8k.j2`; this module reads the final number out of an answer and scores it.

Extraction order (the final answer, never a stray number in the working): the last `#### X` line; the last
`\\boxed{X}`; the last "answer is X" / "Answer: X" / "**Answer:** X" / "final answer: X"; and only when none of
these is present, the last number of the answer's last non-empty line. Numbers: thousands separators are dropped
only in well-formed groups (`1,234,567`), never read as a decimal point; currency signs, `%`, units and trailing
periods are ignored; a unicode minus counts; `18.00` equals `18`. A space, thin space or no-break space between
well-formed groups is a thousands separator too (`$1 250 000`, `36 500`). A final answer that names two candidates
(`15 or 20`, `either 7 or 9`) is `wrong`: the grader does not pick whichever it happened to read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from evalkit_evals.verdict import Verdict

# Spaces as separators only between whole groups, and never before a unit glued on with a hyphen ("3 500-gram").
_SPACES = "[ \u2009\u202f\u00a0]"
_NUM = (r"[-−–]?\$?\s?[-−–]?(?:\d{1,3}(?:" + _SPACES + r"\d{3})+(?![\d-])|\d{1,3}(?:,\d{3})+(?!\d)|\d+)"
        r"(?:\.\d+)?|[-−–]?\.\d+")
_NUM_RE = re.compile(_NUM)
# Two candidates in the final answer: the read number followed (or preceded) by "or" / "/" and another number.
_HEDGE_AFTER = re.compile(r"\s*(?:,\s*)?\b(?:or|and/or)\b\s*(?:maybe\s+|perhaps\s+)?(?:\\?\$)?\s?\d")
_HEDGE_BEFORE = re.compile(r"\d[^\S\n]*(?:,\s*)?\b(?:or|and/or)\b\s*(?:maybe\s+|perhaps\s+)?(?:\\?\$)?\s?$")
_MARKERS = [
    ("#### line", re.compile(r"####\s*\**\s*(?:\\\$|\$)?\s*(" + _NUM + ")")),
    ("\\boxed{}", re.compile(r"\\boxed\s*\{\s*(?:\\text\{)?\s*(?:\\\$|\$)?\s*(" + _NUM + ")")),
    ("answer phrase", re.compile(
        r"(?:final answer|answer)\s*(?:is|:|=)?\s*[:=]?\s*(?:\*\*|__)?\s*(?:is|:|=)?\s*(?:\*\*|__)?\s*"
        r"(?:\\\(|\\\[|\$\\boxed\{|\$)?\s*(?:either\s+)?(?:\\\$|\$)?\s*(" + _NUM + ")", re.IGNORECASE)),
]


def to_decimal(text: str) -> Decimal | None:
    """A number as written (`$1,234.00`, `−5`) as a Decimal, or None."""
    t = text.replace("−", "-").replace("–", "-").replace("$", "").replace(",", "")
    t = re.sub(_SPACES, "", t)
    t = t.rstrip(".")
    try:
        return Decimal(t)
    except InvalidOperation:
        return None


def gold_answer(row: dict) -> Decimal:
    """The number after `####` in the dataset's worked answer."""
    value = to_decimal(row["answer"].split("####")[-1].strip())
    assert value is not None, row["answer"]
    return value


def extract(answer: str) -> tuple[Decimal | None, str, str | None]:
    """(number, how it was found, text read) from a chat answer; the number is None when nothing was read."""
    read = read_final(answer)
    return read.value, read.how, read.raw


@dataclass(frozen=True)
class FinalAnswer:
    """The final number read from an answer: its value, how it was found, its text, and whether it was hedged."""

    value: Decimal | None
    how: str
    raw: str | None
    hedged: bool = False


def read_final(answer: str) -> FinalAnswer:
    """The final answer's number, with `hedged` set when another candidate stands beside it ("15 or 20")."""
    for how, rx in _MARKERS:
        hits = list(rx.finditer(answer))
        if hits:
            m = hits[-1]
            hedged = bool(_HEDGE_AFTER.match(answer, m.end(1)))
            return FinalAnswer(to_decimal(m.group(1)), how, _hedge_text(answer, m.start(1), m.end(1), hedged), hedged)
    lines = [ln for ln in answer.strip().splitlines() if ln.strip()]
    if lines:
        hits = list(_NUM_RE.finditer(lines[-1]))
        if hits:
            m = hits[-1]
            hedged = bool(_HEDGE_BEFORE.search(lines[-1][:m.start()]) or _HEDGE_AFTER.match(lines[-1], m.end()))
            raw = lines[-1].strip().rstrip(".") if hedged else m.group().strip()
            return FinalAnswer(to_decimal(m.group()), "last number of the last line", raw, hedged)
    return FinalAnswer(None, "no number found", None)


def _hedge_text(answer: str, start: int, end: int, hedged: bool) -> str:
    if not hedged:
        return answer[start:end]
    line_end = answer.find("\n", end)
    return answer[start:line_end if line_end >= 0 else len(answer)].strip().rstrip(".")


def grade(row: dict, answer: str) -> Verdict:
    """Compare the extracted number with the gold `####` number exactly (as decimals)."""
    gold = gold_answer(row)
    read = read_final(answer)
    value, how, raw = read.value, read.how, read.raw
    if read.hedged:
        return Verdict("wrong", raw,
                       f"{how}: {raw!r} names more than one candidate; gold {format(gold.normalize(), 'f')}")
    if value is None:
        return Verdict("unparsed", raw, how)
    same = value == gold
    text = format(value.normalize(), "f") if value == value.to_integral() else str(value)
    return Verdict("correct" if same else "wrong", text,
                   f"{how}: read {raw!r} = {text}, gold {format(gold.normalize(), 'f')}")
