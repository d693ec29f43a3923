"""Number readers (GSM8K and the `number` user-eval extractor), issue #55: every place of `read_spans` read for a
number with GSM8K's number rules (`gsm8k._quantity`: markup, calculations, words, separators, compounds), one
`sureness.Found` per reader that applies, then the re-check statements after the answer as `LATER` readings.
Readings compare by the number's value (`key`: `18.00` and `18` are one key); a hedged reading ("15 or 20") keys
as its text, so it agrees with nothing."""

from __future__ import annotations

import re
from decimal import Decimal

from evalkit_evals import gsm8k, read_spans
from evalkit_evals.read_spans import Span
from evalkit_evals.sureness import DECLINED, Found, Strength


def key(value: Decimal | None) -> str | None:
    """The comparison key of a number (None for none)."""
    return None if value is None else gsm8k._fmt(value)


def _read(span: Span, question: str) -> gsm8k.FinalAnswer | None:
    rule = f"number.{span.rule}"
    if span.rule == "last_line":
        return gsm8k._last_line(span.text, question)
    if span.rule == "first":
        return gsm8k._answer_first([span.text, "Explanation:"], question)
    text = span.text
    if span.rule == "boxed":
        text = text.replace("\\$", "$").replace("\\!", "")
    return gsm8k._quantity(text, rule, question)


def _found(span: Span, read: gsm8k.FinalAnswer | None, gold: Decimal | None) -> Found:
    rule = f"number.{span.rule}"
    if read is None or (read.value is None and not read.hedged):
        return Found(rule, span.strength, None, at=span.at)
    if read.hedged:
        return Found(rule, span.strength, read.raw, f"hedge:{read.raw}", False, span.at)
    value = read.value
    assert value is not None
    return Found(rule, span.strength, key(value), key(value), gold is not None and value == gold, span.at)


_PAREN = re.compile(r"\([^()]*\)")
_ON_THE_HOUR = re.compile(r"(?<=\d):00\b")  # "2:00 pm" is the hour 2, not 2 then 0
# A bound or an estimate, not a value: "over 18 hours", "approximately $1,000,000".
_QUALIFIED = re.compile(
    r"\b(?:over|more than|at least|at most|about|approximately|approx\.?|around|roughly|nearly|almost|up to|"
    r"less than|under|fewer than|greater than|above|below|~)\s*\$?\s*$",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z$])|\n")


def _clause_end(span: Span, read: gsm8k.FinalAnswer | None, gold: Decimal | None) -> Found | None:
    """A marker's sentence that goes on past the number read to another number ("200 bags, 200 × $5 = $1000",
    "2:10 pm", "32/3"): its last number (outside parentheses) as a second reading of the same strength."""
    if read is None or read.value is None or read.hedged or read.how.startswith("gsm8k.compound"):
        return None
    sentence = _ON_THE_HOUR.sub("", _SENTENCE.split(span.text.strip(), 1)[0])
    nums = list(gsm8k._NUM_RE.finditer(_PAREN.sub(" ", sentence)))
    if len(nums) < 2:
        return None
    value = gsm8k.to_decimal(nums[-1].group().strip())
    if value is None or value == read.value:
        return None
    return Found(f"number.{span.rule}.sentence_end", span.strength, key(value), key(value), value == gold, span.at)


def _prose(span: Span, gold: Decimal | None) -> Found | None:
    """A JSON or tagged answer written as prose ("The total cost is $65,960."): the one number of its last
    sentence, a plain reading (none when that sentence has several)."""
    sentences = [x for x in _SENTENCE.split(span.text.strip()) if x.strip()]
    if not sentences:
        return None
    last = _PAREN.sub(" ", sentences[-1])
    nums = list(gsm8k._NUM_RE.finditer(last))
    if len(nums) != 1 or _QUALIFIED.search(last[: nums[0].start()]):
        return None
    value = gsm8k.to_decimal(nums[0].group().strip())
    if value is None:
        return None
    return Found(f"number.{span.rule}.prose", Strength.PLAIN, key(value), key(value), value == gold, span.at)


def readings(answer: str, question: str, gold: Decimal | None) -> list[Found]:
    """Every number reader's reading of `answer` (the final channel's text), then the later statements."""
    out: list[Found] = []
    taken: set[tuple[str, Strength]] = set()
    for span in read_spans.spans(answer):
        if span.rule in ("label", "bold"):  # every hit, the last first: the last that holds a number reads
            if (span.rule, span.strength) in taken:
                continue
            read = _read(span, question)
            if read is None:
                continue  # a label with no number after it ("answer this question"): the next one back
            taken.add((span.rule, span.strength))
            out.append(_found(span, read, gold))
        else:
            read = _read(span, question)
            out.append(_found(span, read, gold))
            if span.rule in ("json", "tag") and (read is None or read.value is None):
                prose = _prose(span, gold)
                out += [prose] if prose else []
                if prose is None and read_spans.declines(span.text):  # "Cannot be determined": no value, said so
                    rule = f"number.{span.rule}.declined"
                    out.append(Found(rule, span.strength, span.text, DECLINED, False, span.at))
        if span.strength is Strength.MARKER:
            end = _clause_end(span, read, gold)
            out += [end] if end else []
    found = [f for f in out if f.value is not None]  # a fallback too: a re-check after it is read
    after = max((f.at for f in found), default=None)
    if after is not None:
        for span in read_spans.later(answer, after):
            read = gsm8k._quantity(span.text, "number.recheck", question)
            if read is not None and read.value is not None and not read.hedged:
                out.append(_found(span, read, gold))
    out += read_spans.withdrawn(answer, "number")
    return out
