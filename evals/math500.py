"""MATH-500: the prompt is `prompts/math500.j2`; the answer is the last `\\boxed{}` (matched by braces), judged
against the dataset's `answer` with math-verify.

Policy: equivalence is by value (math-verify's symbolic and numeric comparison), so `\\frac{2}{4}` for `\\frac12`,
`0.5` for `\\frac{1}{2}` and `\\sqrt{50}` for `5\\sqrt{2}` count as correct even though the problem may ask for
simplest form; intervals and sets compare as such, and `\\text{}` units, `^\\circ` and `\\$` are ignored by
math-verify's normalisation. An answer without any `\\boxed{}` falls back to math-verify's own extraction of the
final answer (e.g. "the answer is $3$"); if that finds nothing, the answer is `unparsed`.
"""

from __future__ import annotations

import re

from evalkit_evals.math_judge import MathJudge
from evalkit_evals.verdict import Verdict

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")


def last_boxed(text: str) -> str | None:
    """The content of the last `\\boxed{...}` or `\\fbox{...}`, braces matched; None when there is none."""
    starts = [m.end() for m in _BOXED.finditer(text)]
    for start in reversed(starts):
        depth = 1
        for i in range(start, len(text)):
            c = text[i]
            if c == "{" and text[i - 1] != "\\":
                depth += 1
            elif c == "}" and text[i - 1] != "\\":
                depth -= 1
                if depth == 0:
                    return text[start:i].strip()
    return None


def grade(row: dict, answer: str, judge: MathJudge) -> Verdict:
    """Extract the last boxed answer and ask math-verify whether it equals the gold `answer`."""
    gold = f"${row['answer'].strip()}$"
    boxed = last_boxed(answer)
    if boxed is not None:
        extracted, how = boxed, "last \\boxed{}"
        result = judge.check(gold, f"$\\boxed{{{boxed}}}$")
    else:
        extracted, how = None, "no \\boxed{}; math-verify's own final-answer extraction"
        result = judge.check(gold, answer)
    if "error" in result:
        return Verdict("error", extracted, result["error"])
    if result["pred"] is None:
        return Verdict("unparsed", extracted, f"{how}: nothing math-verify could parse")
    extracted = extracted if extracted is not None else result["pred"]
    verdict = "correct" if result["ok"] else "wrong"
    return Verdict(verdict, extracted,
                   f"{how}: parsed {result['pred']}, gold {row['answer'].strip()} parsed {result['gold']}: "
                   + ("equivalent" if result["ok"] else "not equivalent"))
