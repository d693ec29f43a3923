"""Notation forms: how a number or a LaTeX value is written (separators of several locales, words, scientific,
currency and magnitude words, units and percentages, Unicode math, LaTeX variants, intervals)."""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation

from evalkit_evals.forms.form import Form, Subject, kinds

Writer = Callable[[Subject, str], "str | None"]

_ONES = [
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
_TENS = ["_", "_", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def _int(v: str) -> int | None:
    try:
        d = Decimal(v)
    except InvalidOperation:
        return None
    return int(d) if d == d.to_integral_value() else None


def words(n: int) -> str:
    """A whole number below a billion in English words ("two hundred sixty-two thousand five hundred")."""
    if n < 0:
        return "negative " + words(-n)
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + ("-" + _ONES[n % 10] if n % 10 else "")
    if n < 1000:
        return _ONES[n // 100] + " hundred" + (" " + words(n % 100) if n % 100 else "")
    for size, name in ((10**6, "million"), (1000, "thousand")):
        if n >= size:
            return words(n // size) + f" {name}" + (" " + words(n % size) if n % size else "")
    raise AssertionError(n)


def _grouped(n: int, sep: str) -> str:
    return f"{n:,}".replace(",", sep)


def _big(fn: Callable[[int], str]) -> Writer:
    # The form applies to whole numbers of 1,000 or more.
    def write(s: Subject, v: str) -> str | None:
        n = _int(v)
        return fn(n) if n is not None and abs(n) >= 1000 else None

    return write


def _scientific(v: str, template: str) -> str | None:
    n = _int(v)
    if n is None or abs(n) < 1000:
        return None
    d = Decimal(n).normalize()
    exp = d.adjusted()
    mantissa = format((d.scaleb(-exp)).normalize(), "f")
    return template.format(m=mantissa, e=exp)


def _magnitude(v: str) -> str | None:
    n = _int(v)
    if n is None or n < 10_000:
        return None
    size, name = (10**6, "million") if n >= 10**6 else (1000, "thousand")
    return f"${format((Decimal(n) / size).normalize(), 'f')} {name}"


def _dozen(v: str) -> str | None:
    n = _int(v)
    if n is None or n <= 0 or n % 12 or n > 144:
        return None
    return "a dozen" if n == 12 else f"{words(n // 12)} dozen"


def _negative(v: str, fn: Callable[[int], str]) -> str | None:
    n = _int(v)
    return fn(abs(n)) if n is not None and n < 0 else None


def _math_sub(pattern: str, repl: str) -> Writer:
    # A LaTeX rewrite that applies only where it matches.
    rx = re.compile(pattern)

    def write(s: Subject, v: str) -> str | None:
        return rx.sub(repl, v) if rx.search(v) else None

    return write


def _math_number(template: str) -> Writer:
    # A plain-number value written inside a LaTeX template.
    def write(s: Subject, v: str) -> str | None:
        if not re.fullmatch(r"-?\d+(?:\.\d+)?", v):
            return None
        text = template.replace("{v}", v)
        return f"${text}$" if s.kind == "number" else text

    return write


NUMBER = kinds("number")
MATH = kinds("math")
NOTATIONS: tuple[Form, ...] = (
    Form("plain", "notation", kinds("number", "math"), lambda s, v: v, example="1234"),
    Form("comma_thousands", "notation", NUMBER, _big(lambda n: _grouped(n, ",")), example="1,234"),
    Form("space_thousands", "notation", NUMBER, _big(lambda n: _grouped(n, " ")), example="1 234"),
    Form("narrow_space_thousands", "notation", NUMBER, _big(lambda n: _grouped(n, "\u202f")), example="1\u202f234"),
    Form(
        "dot_thousands_comma_decimal",
        "notation",
        NUMBER,
        _big(lambda n: _grouped(n, ".") + ",00"),
        example="1.234,00",
    ),
    Form("apostrophe_thousands", "notation", NUMBER, _big(lambda n: _grouped(n, "'")), example="1'234"),
    Form(
        "words",
        "notation",
        NUMBER,
        lambda s, v: words(n) if (n := _int(v)) is not None and n >= 0 else None,
        example="twenty-five",
    ),
    Form(
        "negative_words",
        "notation",
        NUMBER,
        lambda s, v: _negative(v, lambda n: "negative " + words(n)),
        example="negative ten",
    ),
    Form("unicode_minus", "notation", NUMBER, lambda s, v: _negative(v, lambda n: f"−{n}"), example="−10"),
    Form("dozen", "notation", NUMBER, lambda s, v: _dozen(v), example="two dozen"),
    Form("scientific_times", "notation", NUMBER, lambda s, v: _scientific(v, "{m} × 10^{e}"), example="2.88 × 10^6"),
    Form("scientific_e", "notation", NUMBER, lambda s, v: _scientific(v, "{m}e{e}"), example="2.88e6"),
    Form("magnitude_words", "notation", NUMBER, lambda s, v: _magnitude(v), example="$1.45 million"),
    Form(
        "currency",
        "notation",
        NUMBER,
        lambda s, v: f"${_grouped(n, ',')}.00" if (n := _int(v)) is not None and n >= 0 else None,
        example="$1,234.00",
    ),
    Form("unit", "notation", NUMBER, lambda s, v: f"{v} km", example="42 km"),
    Form("percent", "notation", NUMBER, lambda s, v: f"{v}%", example="42%"),
    Form(
        "trailing_zeros", "notation", NUMBER, lambda s, v: f"{v}.00" if _int(v) is not None else None, example="18.00"
    ),
    Form("latex_thousands", "notation", NUMBER, _big(lambda n: "$" + _grouped(n, "{,}") + "$"), example="$1{,}234$"),
    Form(
        "latex_text_unit", "notation", kinds("number", "math"), _math_number("{v}\\text{ cm}"), example="28\\text{ cm}"
    ),
    Form("dfrac", "notation", MATH, _math_sub(r"\\frac", r"\\dfrac"), example="\\dfrac{1}{4}"),
    Form("tfrac", "notation", MATH, _math_sub(r"\\frac", r"\\tfrac"), example="\\tfrac{1}{4}"),
    Form("unicode_sqrt", "notation", MATH, _math_sub(r"\\sqrt\{(\d+)\}", "√\\1"), example="1+2√3"),
    Form("unicode_infinity", "notation", MATH, _math_sub(r"\\infty", "∞"), example="(2,∞)"),
    Form("unicode_minus_math", "notation", MATH, _math_sub(r"-", "−"), example="−2,1"),
    Form("degree_sign", "notation", MATH, _math_sub(r"\^\\circ", "°"), example="55°"),
    Form(
        "left_right_interval",
        "notation",
        MATH,
        lambda s, v: (
            f"\\left{v[0]} {v[1:-1]} \\right{v[-1]}"
            if re.fullmatch(r"[(\[][^()\[\]]*[)\]]", v) and "\\left" not in v
            else None
        ),
        example="\\left( 2, \\infty \\right)",
    ),
    Form(
        "latex_thousands_math",
        "notation",
        MATH,
        lambda s, v: _grouped(n, "{,}") if (n := _int(v)) is not None and abs(n) >= 1000 else None,
        example="9{,}901",
    ),
)
