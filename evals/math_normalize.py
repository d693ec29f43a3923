"""What math-verify's normalisation leaves out, added before an answer reaches it: `°` as `^\\circ`, repeating
decimals (`0.\\overline{6}` is 2/3), a thin space between digit groups (`10\\,080`), `\\lor` as "or", articles
inside `\\text{}` ("an ellipse"), Unicode math (`√3`, `∞`, `−`, `×`),
and a text answer written without LaTeX ("ellipse", "(C)") wrapped in `\\text{}`."""

from __future__ import annotations

import re
from fractions import Fraction

_REPEATING = re.compile(r"(-?)(\d*)\.(\d*)\\(?:overline|bar)\s*\{(\d+)\}")
_THIN_GROUP = re.compile(r"(?<=\d)\\[,;: ]\s*(?=\d{3}(?!\d))")
_ARTICLE = re.compile(r"\\text\s*\{\s*(?:an?|the)\s+", re.IGNORECASE)
_SQRT = re.compile(r"√\s*(?:\{([^{}]*)\}|([\w.]+))")
_WORDS = re.compile(r"^\(?[A-Za-z][A-Za-z \-']*\)?$")


def repeating_to_fraction(m: re.Match[str]) -> str:
    """`0.1\\overline{6}` as `\\frac{1}{6}`."""
    sign, whole, fixed, rep = m.groups()
    value = Fraction(int(whole or 0)) + Fraction(
        int(fixed + rep) - int(fixed or 0), 10 ** len(fixed) * (10 ** len(rep) - 1)
    )
    value = -value if sign else value
    return f"\\frac{{{value.numerator}}}{{{value.denominator}}}" if value.denominator != 1 else str(value.numerator)


def normalize(latex: str) -> str:
    """The answer's LaTeX with the forms above rewritten for math-verify."""
    out = (
        _SQRT.sub(lambda m: "\\sqrt{" + (m.group(1) or m.group(2)) + "}", latex)
        .replace("∞", "\\infty")
        .replace("−", "-")
        .replace("×", "\\times")
    )
    out = out.replace("°", "^\\circ").replace("\\lor", "\\text{ or }").replace("\\vee", "\\text{ or }")
    out = _THIN_GROUP.sub("", _REPEATING.sub(repeating_to_fraction, out))
    return _ARTICLE.sub(r"\\text{", out)


def as_latex(text: str) -> str:
    """A stated answer as math-verify input: words in `\\text{}` (articles dropped), anything else as math."""
    t = text.strip().strip("*_").strip().rstrip(".").strip()
    for open_, close in (("\\(", "\\)"), ("\\[", "\\]")):
        if t.startswith(open_) and t.endswith(close):
            t = "$" + t[2:-2] + "$"
    if t.startswith("$") and t.endswith("$") and len(t) > 1:
        return f"${normalize(t.strip('$'))}$"
    if _WORDS.match(t):
        t = re.sub(r"^(?:an?|the)\s+", "", t, flags=re.IGNORECASE)
        return f"$\\text{{{t}}}$"
    return f"${normalize(t)}$"
