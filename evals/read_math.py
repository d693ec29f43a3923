"""Math readers (MATH-500 and the `math` user-eval extractor), issue #55: every place of `read_spans` read as an
answer (the box, several boxes for a multi-part gold, a label, JSON, a tag, bold, an answer given first, a value in
a fence), the last math of the last line and math-verify's own extraction over the whole text (both fallbacks),
then the re-check statements after the answer (`LATER`). Each is judged against the gold by math-verify; readings
compare by that: every value equivalent to the gold is one key, another value keys as its text."""

from __future__ import annotations

import re

from evalkit_evals import math500, read_spans
from evalkit_evals.math_judge import MathJudge
from evalkit_evals.math_normalize import as_latex, normalize
from evalkit_evals.read_spans import Span
from evalkit_evals.sureness import Found, Strength

_INLINE = re.compile(r"\$\$?([^$]+)\$\$?|\\\((.+?)\\\)|\\\[(.+?)\\\]")
GOLD_KEY = "=gold"
_EQUALS = re.compile(r"(?<![<>!=\\])=(?!=)")
_CLOSING = re.compile(r"(?:\\\]|\\\)|\$|\.|,|\s)+$")


def _result(stated: str) -> str:
    """A stated calculation's result, after its last `=` ("$5 + 4 = 9$" is 9, "P(5) = 125" is 125); else as
    stated. An inequality (`>=`, `\\le`) is no calculation."""
    parts = _EQUALS.split(stated)
    if len(parts) < 2:
        return stated
    tail = _CLOSING.sub("", parts[-1]).strip()
    return tail or stated


def key(value: str | None, correct: bool | None, parsed: str | None = None) -> str | None:
    """The comparison key of a math answer: `=gold` when equivalent to the gold, else what math-verify parsed it as
    (`\\frac{512}{27}` and `512/27` are one key), else its text without spaces."""
    if value is None:
        return None
    if correct:
        return GOLD_KEY
    return f"parsed:{parsed}" if parsed else re.sub(r"\s+|\$", "", value)


def verdict_key(extracted: str, correct: bool, gold: str, judge: MathJudge) -> str | None:
    """The key of the value the rules graded (parsed as a box, else as a stated answer)."""
    if correct:
        return GOLD_KEY
    for given in (f"$\\boxed{{{normalize(extracted)}}}$", as_latex(extracted), extracted):
        pred = judge.check(f"${gold.strip()}$", given).get("pred")
        if pred is not None:
            return key(extracted, False, str(pred))
    return key(extracted, False)


def _judged(
    rule: str, strength: Strength, value: str | None, given: str, gold: str, judge: MathJudge, at: int
) -> Found:
    if value is None:
        return Found(rule, strength, None, at=at)
    result = judge.check(gold, given)
    if result.get("pred") is None:
        return Found(rule, strength, None, at=at)
    ok = bool(result.get("ok"))
    return Found(rule, strength, value, key(value, ok, str(result["pred"])), ok, at)


def _from(span: Span, answer: str, gold_text: str, judge: MathJudge) -> Found:
    rule, gold = f"math.{span.rule}", f"${gold_text.strip()}$"
    if span.rule == "boxed":
        multi = math500._multi_boxed(answer, gold_text)
        value = multi if multi is not None else span.text
        return _judged(rule, span.strength, value, f"$\\boxed{{{normalize(value)}}}$", gold, judge, span.at)
    if span.rule == "last_line":
        hits = list(_INLINE.finditer(span.text))
        inline: str | None = next((g for g in hits[-1].groups() if g), None) if hits else None
        return _judged(rule, span.strength, inline, f"${inline}$", gold, judge, span.at)
    text = re.sub(r"^\*\*|\*\*$", "", span.text.strip()) if span.rule == "first" else span.text
    stated = math500._answer_like(text)
    if stated is None and span.rule in ("json", "tag", "qa") and 0 < len(text.strip()) <= 80:
        stated = text.strip()  # a JSON or tagged answer is the answer as written ("x = -4")
    if stated is not None and not _EQUALS.search(gold_text):  # an equation asked for stays whole
        stated = _result(stated)
    return _judged(rule, span.strength, stated, as_latex(stated) if stated else "", gold, judge, span.at)


def readings(answer: str, gold: str, judge: MathJudge) -> list[Found]:
    """Every math reader's reading of `answer` against `gold`, then the later statements."""
    out: list[Found] = []
    taken: set[tuple[str, Strength]] = set()
    for span in read_spans.spans(answer):
        if span.rule == "hash":
            continue
        found = _from(span, answer, gold, judge)
        if span.rule in ("label", "bold"):
            if (span.rule, span.strength) in taken or found.value is None:
                continue
            taken.add((span.rule, span.strength))
        out.append(found)
    whole = judge.check(f"${gold.strip()}$", normalize(answer))
    if whole.get("pred"):
        ok = bool(whole.get("ok"))
        pred = str(whole["pred"])
        out.append(Found("math.math_verify", Strength.FALLBACK, pred, key(pred, ok, pred), ok))
    found_at = [f.at for f in out if f.value is not None]
    if found_at:
        for span in read_spans.later(answer, max(found_at)):
            value = math500._answer_like(span.text)
            if value and re.search(r"[\d\\$]", value):
                found = _judged("math.recheck", Strength.LATER, value, as_latex(value), f"${gold}$", judge, span.at)
                if found.value is not None:
                    out.append(found)
    out += read_spans.withdrawn(answer, "math")
    return out
