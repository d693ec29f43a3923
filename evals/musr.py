"""MuSR: the MuSR authors' numbered-choice prompt (`prompts/musr.j2`) and a strict final-answer parse.

The answer is the last `ANSWER: <n>` (any case, markdown bold allowed, `<n>` optionally followed by ` - choice`),
or `ANSWER: <choice text>` when the text equals one choice exactly. No substring credit for a choice named
somewhere in the prose, and no random fallback: anything else is `unparsed`, a number outside 1..n too.
"""

from __future__ import annotations

import re

from evalkit_evals.prompting import musr_choices
from evalkit_evals.verdict import Verdict

_ANSWER = re.compile(r"answer\s*[:：]\s*(?:\*\*|__)?\s*\(?\s*([^\n]*?)\s*$", re.IGNORECASE | re.MULTILINE)
_NUMBER = re.compile(r"^\(?(\d+)\)?(?:\s*(?:[-–.:)]\s*.*)?)?$")


def extract(answer: str, choices: list[str]) -> tuple[int | None, str, str | None]:
    """(1-based choice, how it was read, text read) from the answer's last `ANSWER:` line."""
    hits = list(_ANSWER.finditer(answer))
    if not hits:
        return None, "no 'ANSWER:' line", None
    raw = hits[-1].group(1).strip().strip("*_").strip().rstrip(".").strip()
    m = _NUMBER.match(raw)
    if m:
        n = int(m.group(1))
        if 1 <= n <= len(choices):
            return n, "choice number after ANSWER:", raw
        return None, f"choice number {n} outside 1..{len(choices)}", raw
    exact = [i for i, c in enumerate(choices, 1) if c.strip().lower() == raw.lower()]
    if len(exact) == 1:
        return exact[0], "exact choice text after ANSWER:", raw
    return None, "ANSWER: holds neither a choice number nor a choice's exact text", raw


def grade(row: dict, answer: str) -> Verdict:
    """Right when the chosen number is `answer_index + 1`."""
    choices = musr_choices(row)
    gold = int(row["answer_index"]) + 1
    n, how, raw = extract(answer, choices)
    if n is None:
        return Verdict("unparsed", raw, how)
    return Verdict("correct" if n == gold else "wrong", str(n),
                   f"{how}: {n} ({choices[n - 1]!r}), gold {gold} ({choices[gold - 1]!r})")
