"""Compound quantities in an answer ("2 hours and 10 minutes", "5 feet 3 inches", "3 dollars and 50 cents") and
the unit a GSM8K question asks for ("How many minutes ...?"), so a compound can be read in that unit."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

# Each family's units in its smallest unit; the aliases are the spellings models use.
FAMILIES: dict[str, dict[str, int]] = {
    "time": {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 604800},
    "length": {"inch": 1, "foot": 12, "yard": 36, "mile": 63360},
    "weight": {"ounce": 1, "pound": 16},
    "metric length": {"millimeter": 1, "centimeter": 10, "meter": 1000, "kilometer": 1_000_000},
    "mass": {"gram": 1, "kilogram": 1000},
    "money": {"cent": 1, "dollar": 100},
}
_ALIASES = {
    "feet": "foot",
    "inches": "inch",
    "hr": "hour",
    "hrs": "hour",
    "min": "minute",
    "mins": "minute",
    "sec": "second",
    "secs": "second",
    "lb": "pound",
    "lbs": "pound",
    "oz": "ounce",
    "ft": "foot",
    "km": "kilometer",
    "cm": "centimeter",
    "mm": "millimeter",
    "kg": "kilogram",
    "metre": "meter",
    "metres": "meter",
    "centimetre": "centimeter",
    "centimetres": "centimeter",
}
_UNIT_WORD = r"[A-Za-z]+"
_PART = r"(\d+(?:\.\d+)?)\s*(" + _UNIT_WORD + r")"
_COMPOUND = re.compile(_PART + r"(?:\s*,?\s*(?:and\s+)?" + _PART + r")(?:\s*,?\s*(?:and\s+)?" + _PART + r")?")


def unit_of(word: str) -> tuple[str, str] | None:
    """(family, unit) of a unit word in any of its spellings, or None."""
    w = word.lower()
    w = _ALIASES.get(w, w)
    for cand in (w, w[:-1] if w.endswith("s") else w):
        cand = _ALIASES.get(cand, cand)
        for family, units in FAMILIES.items():
            if cand in units:
                return family, cand
    return None


@dataclass(frozen=True)
class Compound:
    """A quantity written in two or three units of one family, largest first; `base` is in the smallest unit."""

    text: str
    family: str
    base: Decimal
    start: int
    end: int

    def in_unit(self, unit: str) -> Decimal:
        """The quantity in `unit` (exactly, as a decimal)."""
        return (self.base / FAMILIES[self.family][unit]).normalize()


def _at(m: re.Match[str]) -> Compound | None:
    parts = [(m.group(k), m.group(k + 1)) for k in (1, 3, 5) if m.group(k)]
    units = [unit_of(u) for _, u in parts]
    if any(u is None for u in units) or len({u[0] for u in units if u}) != 1:
        return None
    family = units[0][0]  # type: ignore[index]  # the check above rules out None
    factors = [FAMILIES[family][u[1]] for u in units if u]
    if any(a <= b for a, b in zip(factors, factors[1:])):
        return None  # "2 minutes and 3 hours" is no compound
    base = sum((Decimal(n) * f for (n, _), f in zip(parts, factors)), Decimal(0))
    return Compound(m.group().strip(), family, base, m.start(), m.end())


def compound_at(text: str, pos: int) -> Compound | None:
    """The compound quantity that starts at `pos` (a `$` sign before it allowed), or None."""
    m = _COMPOUND.match(text, pos + (1 if text[pos : pos + 1] == "$" else 0))
    return _at(m) if m else None


def compounds(text: str) -> list[Compound]:
    """Every compound quantity in a text."""
    return [c for c in (_at(m) for m in _COMPOUND.finditer(text)) if c]


def asked_unit(question: str, family: str) -> str | None:
    """The unit of `family` the question asks its answer in ("How many minutes", "in hours"), or None; money is
    in dollars unless the question asks for cents."""
    if family == "money" and re.search(r"\bhow many cents\b|\bin cents\b", question, re.IGNORECASE):
        return "cent"
    if family == "money":
        return "dollar"  # GSM8K's money answers are in dollars unless a question says cents
    asks = [s for s in re.split(r"(?<=[.?!])\s+", question.strip()) if s.endswith("?")] or [question]
    sentence = asks[-1]
    for rx in (
        r"\bhow (?:many|much)\s+(?:more\s+|fewer\s+|less\s+|total\s+|in total\s+)?(" + _UNIT_WORD + ")",
        r"\bin\s+(" + _UNIT_WORD + r")\b",
        r"\bhow long\b[^?]*?\b(" + _UNIT_WORD + r")\b",
    ):
        for m in re.finditer(rx, sentence, re.IGNORECASE):
            unit = unit_of(m.group(1))
            if unit and unit[0] == family:
                return unit[1]
    return None
