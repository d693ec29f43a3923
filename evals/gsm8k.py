"""GSM8K: the prompt is `prompts/gsm8k.j2`; this module reads the final number out of an answer and scores it.

Extraction order (the final answer, never a stray number in the working): the last `#### X` line; the last
`\\boxed{X}`; the last "answer is X" / "Answer: X" / "**Answer:** X" / "final answer: X"; and only when none of
these is present, the last number of the answer's last non-empty line. Numbers: thousands separators are dropped
only in well-formed groups (`1,234,567`), never read as a decimal point; currency signs, `%`, units and trailing
periods are ignored; a unicode minus counts; `18.00` equals `18`.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from evalkit_evals.verdict import Verdict

_NUM = r"[-−–]?\$?\s?[-−–]?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?|[-−–]?\.\d+"
_NUM_RE = re.compile(_NUM)
_MARKERS = [
    ("#### line", re.compile(r"####\s*\**\s*(?:\\\$|\$)?\s*(" + _NUM + ")")),
    ("\\boxed{}", re.compile(r"\\boxed\s*\{\s*(?:\\text\{)?\s*(?:\\\$|\$)?\s*(" + _NUM + ")")),
    ("answer phrase", re.compile(
        r"(?:final answer|answer)\s*(?:is|:|=)?\s*[:=]?\s*(?:\*\*|__)?\s*(?:is|:|=)?\s*(?:\*\*|__)?\s*"
        r"(?:\\\(|\\\[|\$\\boxed\{|\$)?\s*(?:\\\$|\$)?\s*(" + _NUM + ")", re.IGNORECASE)),
]


def to_decimal(text: str) -> Decimal | None:
    """A number as written (`$1,234.00`, `−5`) as a Decimal, or None."""
    t = text.replace("−", "-").replace("–", "-").replace("$", "").replace(" ", "").replace(",", "")
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
    """(number, how it was found, text read) from a chat answer."""
    for how, rx in _MARKERS:
        hits = list(rx.finditer(answer))
        if hits:
            raw = hits[-1].group(1)
            return to_decimal(raw), how, raw
    lines = [ln for ln in answer.strip().splitlines() if ln.strip()]
    if lines:
        nums = _NUM_RE.findall(lines[-1])
        if nums:
            return to_decimal(nums[-1]), "last number of the last line", nums[-1]
    return None, "no number found", None


def grade(row: dict, answer: str) -> Verdict:
    """Compare the extracted number with the gold `####` number exactly (as decimals)."""
    gold = gold_answer(row)
    value, how, raw = extract(answer)
    if value is None:
        return Verdict("unparsed", raw, how)
    same = value == gold
    text = format(value.normalize(), "f") if value == value.to_integral() else str(value)
    return Verdict("correct" if same else "wrong", text,
                   f"{how}: read {raw!r} = {text}, gold {format(gold.normalize(), 'f')}")
