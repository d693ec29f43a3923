"""What the sim answers: a recognised question's answer in one of several realistic styles, right or wrong.

Styles (chosen per question from a hash of the seed and question id, so a re-run asks and answers alike):
- gsm8k: the worked solution then `#### 1234`; `The answer is 1,234.`; `$\\boxed{1234}$`; `**Answer:** $1,234`.
- math500: `... the final answer is $\\boxed{ANS}$.`; `\\[\\boxed{ANS}\\]` at the end; `The answer is $\\boxed{ANS}$.`
- musr: a sentence naming the choice, then a last line `ANSWER: 2`, `**ANSWER: 2**` or `Answer: 2` (1-based).
- humanevalplus: a fenced python block with the whole function; bare code; prose, a fenced block, prose.
Wrong answers: gsm8k gold+1; math500 a clearly different value; musr the next choice; humanevalplus a body that
raises. Stress questions get their known answer (wrong ones are off by one / altered). Anything else: filler.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from itertools import cycle, islice

from evalkit.sim.determinism import pick
from evalkit.sim.questions import Question
from evalkit.client.tokens import tokenize

FILLER = (
    "The engine streams this filler text when it does not recognise the question. It reads like ordinary prose, "
    "with short words, commas, and full stops, so that token counts stay realistic. Each sentence adds a little "
    "more, and the paragraph repeats until the request's token budget is spent."
)
_FILLER_TOKENS = tokenize(" " + FILLER)
WRONG_MATH = "-97531"


def filler_tokens(n: int, offset: int = 0) -> list[str]:
    """n filler tokens, continuing the endless filler paragraph from `offset`."""
    toks = list(islice(cycle(_FILLER_TOKENS), offset, offset + n))
    if offset == 0 and toks:
        toks[0] = toks[0].lstrip()
    return toks


def _with_commas(value: str) -> str:
    try:
        d = Decimal(value)
    except InvalidOperation:
        return value
    return f"{d:,}" if d == d.to_integral_value() else value


def _plus_one(value: str) -> str:
    try:
        d = Decimal(value) + 1
    except InvalidOperation:
        return WRONG_MATH
    return str(d.normalize()) if d == d.to_integral_value() else str(d)


def _gsm8k(q: Question, correct: bool, style: int) -> str:
    assert q.row is not None
    work = re.sub(r"<<[^>]*>>", "", q.row["answer"].split("####")[0]).strip()
    n = q.gold if correct else _plus_one(q.gold)
    endings = [f"#### {n}", f"The answer is {_with_commas(n)}.", f"$\\boxed{{{n}}}$", f"**Answer:** ${_with_commas(n)}"]
    return f"{work}\n{endings[style % 4]}"


def _math500(q: Question, correct: bool, style: int) -> str:
    ans = q.gold if correct else _plus_one(q.gold)
    if not correct and ans.strip() == str(q.gold).strip():
        ans = WRONG_MATH
    pre = "Let me set up the problem and simplify step by step, checking each transformation."
    endings = [
        f"{pre}\n\nAfter simplifying, the final answer is $\\boxed{{{ans}}}$.",
        f"{pre}\n\nSo we obtain\n\\[\\boxed{{{ans}}}\\]",
        f"{pre}\n\nThe answer is $\\boxed{{{ans}}}$.",
    ]
    return endings[style % 3]


def _musr(q: Question, correct: bool, style: int) -> str:
    choices, idx = q.gold["choices"], q.gold["index"]
    k = idx if correct else (idx + 1) % len(choices)
    lines = [f"ANSWER: {k + 1}", f"**ANSWER: {k + 1}**", f"Answer: {k + 1}"]
    return f"Weighing every clue in the story, the most consistent option is {choices[k]}.\n\n{lines[style % 3]}"


def _humanevalplus(q: Question, correct: bool, style: int) -> str:
    assert q.row is not None
    body = q.row["canonical_solution"] if correct else "    raise NotImplementedError('evalkit sim: intended wrong answer')\n"
    code = (q.row["prompt"] + body).strip("\n")
    entry = q.row.get("entry_point", "the function")
    forms = [
        f"```python\n{code}\n```",
        code,
        f"Here is an implementation of `{entry}`.\n\n```python\n{code}\n```\n\nIt follows the docstring's examples.",
    ]
    return forms[style % 3]


def _stress(q: Question, correct: bool) -> str:
    if q.kind == "stress_short":
        return str(q.gold if correct else q.gold + 1)
    if q.kind == "stress_long":
        return q.gold if correct else q.gold[::-1] + "X"
    n = int(q.gold)
    nums = [str(i) for i in range(1, n + 1)]
    if not correct and n > 1:
        nums.pop(n // 2)
    return ", ".join(nums)


def answer_text(q: Question, correct: bool, seed: int) -> str:
    """The answer text for a recognised question (empty for filler)."""
    if q.kind == "capability":
        style = pick(12, seed, q.qid, "style")
        writer = {"gsm8k": _gsm8k, "math500": _math500, "musr": _musr, "humanevalplus": _humanevalplus}[q.dataset or ""]
        return writer(q, correct, style)
    if q.kind.startswith("stress_"):
        return _stress(q, correct)
    return ""
