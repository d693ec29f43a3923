"""Number readers (GSM8K and the `number` user-eval extractor), issue #55: every place of `read_spans` read for a
number with GSM8K's number rules (`gsm8k._quantity`: markup, calculations, words, separators, compounds), one
`sureness.Found` per reader that applies, then the re-check statements after the answer as `LATER` readings.
Readings compare by the number's value (`key`: `18.00` and `18` are one key); a hedged reading ("15 or 20") keys
as its text, so it agrees with nothing."""

from __future__ import annotations

from decimal import Decimal

from evalkit_evals import gsm8k, read_spans
from evalkit_evals.read_spans import Span
from evalkit_evals.sureness import Found, Strength


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


def readings(answer: str, question: str, gold: Decimal | None) -> list[Found]:
    """Every number reader's reading of `answer` (the final channel's text), then the later statements."""
    out: list[Found] = []
    taken: set[str] = set()
    for span in read_spans.spans(answer):
        if span.rule in ("label", "bold"):  # every hit, the last first: the last that holds a number reads
            if span.rule in taken:
                continue
            read = _read(span, question)
            if read is None:
                continue  # a label with no number after it ("answer this question"): the next one back
            taken.add(span.rule)
            out.append(_found(span, read, gold))
            continue
        out.append(_found(span, _read(span, question), gold))
    found = [f for f in out if f.value is not None and f.strength > Strength.FALLBACK]
    after = max((f.at for f in found), default=None)
    if after is not None:
        for span in read_spans.later(answer, after):
            read = gsm8k._quantity(span.text, "number.recheck", question)
            if read is not None and read.value is not None and not read.hedged:
                out.append(_found(span, read, gold))
    return out
