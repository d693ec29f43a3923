"""Shared pieces of the answers `evalkit sim` writes for capability questions: a number with thousands commas,
gold plus one, and a value no gold equals. Each eval's `sim_answer` uses them; the styles are the eval's own."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

WRONG_MATH = "-97531"


def with_commas(value: str) -> str:
    """`1234` as `1,234` (a non-integer or a non-number unchanged)."""
    try:
        d = Decimal(value)
    except InvalidOperation:
        return value
    return f"{d:,}" if d == d.to_integral_value() else value


def plus_one(value: str) -> str:
    """The number one more than `value`, or `WRONG_MATH` when `value` is no plain number."""
    try:
        d = Decimal(value) + 1
    except InvalidOperation:
        return WRONG_MATH
    return str(d.normalize()) if d == d.to_integral_value() else str(d)
