"""Numbers written in words, as models write them in a final answer: "twelve", "two hundred and five",
"negative three", "a dozen", "two dozen", "half", "two and a half", "one million"."""

from __future__ import annotations

import re
from decimal import Decimal

_SMALL = {
    w: i
    for i, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
        ]
    )
}
_TENS = {
    w: 10 * i for i, w in enumerate(["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"], 2)
}
_SCALES = {"thousand": 1000, "million": 1_000_000}
_WORD = re.compile(r"[A-Za-z]+")
_STARTS = re.compile(
    r"\b(?:" + "|".join([*_SMALL, *_TENS, "a", "an", "half", "negative", "minus"]) + r")\b", re.IGNORECASE
)
# Pronoun-like on their own ("the one", "half of them"): no number in a final line's prose.
_TOO_VAGUE = {"one", "half", "a half"}


def _tokens(text: str, pos: int) -> list[tuple[str, int, int]]:
    out: list[tuple[str, int, int]] = []
    while True:
        gap = re.match(r"[ \t\-]*", text[pos:])
        m = _WORD.match(text, pos + (gap.end() if gap else 0))
        if not m:
            return out
        out.append((m.group().lower(), m.start(), m.end()))
        pos = m.end()
        if len(out) > 12:
            return out


def parse_at(text: str, pos: int) -> tuple[Decimal, int] | None:
    """(value, end) of a number written in words starting at `pos`, or None."""
    toks = _tokens(text, pos)
    if toks and toks[0][1] - pos > 0 and text[pos : toks[0][1]].strip(" \t"):
        return None
    sign, i = 1, 0
    if toks and toks[0][0] in ("negative", "minus"):
        sign, i = -1, 1
    current: Decimal | int  # `(current or 1) * 100` makes it an int
    total, current, seen, end = Decimal(0), Decimal(0), False, None
    words = [t[0] for t in toks]

    def nxt(k: int) -> str:
        return words[k] if k < len(words) else ""

    while i < len(toks):
        w = words[i]
        if w in _SMALL:
            current += _SMALL[w]
        elif w in _TENS:
            current += _TENS[w]
        elif w == "hundred":
            current = (current or 1) * 100
        elif w in _SCALES:
            total += (current or 1) * _SCALES[w]
            current = Decimal(0)
        elif w in ("dozen", "dozens"):
            current = (current or 1) * 12
        elif w == "half" and nxt(i + 1) == "a" and nxt(i + 2) == "dozen":
            current, i = current + 6, i + 2
        elif w == "half":
            current += Decimal("0.5")
        elif (w in ("a", "an") and nxt(i + 1) in ("hundred", "thousand", "million", "dozen", "half")) or (
            w == "and" and seen and (nxt(i + 1) in _SMALL or nxt(i + 1) in _TENS or nxt(i + 1) == "a")
        ):
            i += 1
            continue
        else:
            break
        seen, end = True, toks[i][2]
        i += 1
    if not seen or end is None or re.match(r"\s+of\b", text[end:]):
        return None
    return sign * (total + current), end


def last_in(line: str) -> tuple[Decimal, int, int] | None:
    """(value, start, end) of the last number in words in a line, leaving out a bare "one" or "half"."""
    found = None
    pos = 0
    while True:
        m = _STARTS.search(line, pos)
        if not m:
            return found
        got = parse_at(line, m.start())
        if got is not None and line[m.start() : got[1]].lower() not in _TOO_VAGUE:
            found = (got[0], m.start(), got[1])
            pos = got[1]
        else:
            pos = m.end()
