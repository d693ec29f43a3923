"""What the sim answers: a recognised question's answer in one of several realistic styles, right or wrong.

A capability item's answer is written by its eval (`sim_answer` in `evals/<name>.py`, or a user eval's file); the
style is chosen here per question from a hash of the seed and question id, so a re-run asks and answers alike:
- gsm8k: the worked solution then `#### 1234`; `The answer is 1,234.`; `$\\boxed{1234}$`; `**Answer:** $1,234`.
- math500: `... the final answer is $\\boxed{ANS}$.`; `\\[\\boxed{ANS}\\]` at the end; `The answer is $\\boxed{ANS}$.`
- musr: a sentence naming the choice, then a last line `ANSWER: 2`, `**ANSWER: 2**` or `Answer: 2` (1-based).
- humanevalplus: a fenced python block with the whole function; bare code; prose, a fenced block, prose.
Wrong answers: gsm8k gold+1; math500 a clearly different value; musr the next choice; humanevalplus a body that
raises. Stress questions get their known answer (wrong ones are off by one / altered); "Reply with just: X" gets X. A
judge's equality-check prompt gets `Yes` when the reference (or, for a MuSR reference `2 (text)`, its number or its
text) stands as a whole token in the response's last non-empty line, `Unsure` for an empty response, else `No`; a wrong
verdict swaps Yes and No (Unsure becomes No). Anything else: filler.
"""

from __future__ import annotations

import re
from itertools import cycle, islice

from evalkit.client.tokens import tokenize
from evalkit.sim.determinism import pick
from evalkit.sim.questions import Question
from evalkit_evals import registry

FILLER = (
    "The engine streams this filler text when it does not recognise the question. It reads like ordinary prose, "
    "with short words, commas, and full stops, so that token counts stay realistic. Each sentence adds a little "
    "more, and the paragraph repeats until the request's token budget is spent."
)
_FILLER_TOKENS = tokenize(" " + FILLER)


def filler_tokens(n: int, offset: int = 0) -> list[str]:
    """n filler tokens, continuing the endless filler paragraph from `offset`."""
    toks = list(islice(cycle(_FILLER_TOKENS), offset, offset + n))
    if offset == 0 and toks:
        toks[0] = toks[0].lstrip()
    return toks


def _stress(q: Question, correct: bool) -> str:
    if q.kind == "stress_short":
        return str(q.gold if correct else q.gold + 1)
    if q.kind == "stress_long":
        code: str = q.gold  # the secret code
        return code if correct else code[::-1] + "X"
    n = int(q.gold)
    nums = [str(i) for i in range(1, n + 1)]
    if not correct and n > 1:
        nums.pop(n // 2)
    return ", ".join(nums)


_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_CHOICE = re.compile(r"^(\d+) \((.*)\)$")


def _plain(text: str) -> str:
    text = _THOUSANDS.sub("", _BOXED.sub(r"\1", text)).replace("$", "").replace("**", "")
    return " ".join(text.lower().split()).rstrip(".")


def judge_word(reference: str, response: str, correct: bool) -> str:
    """The sim judge's verdict on a response against a reference: Yes, No or Unsure (see the module docstring)."""
    lines = [ln for ln in response.splitlines() if ln.strip()]
    if not lines:
        word = "Unsure"
    else:
        last = _plain(lines[-1])
        ref = _plain(reference)
        m = _CHOICE.match(ref)
        wanted = [ref, *(m.groups() if m else ())]
        hit = any(re.search(rf"(?<![\w.\-]){re.escape(w)}(?![\w]|\.\d)", last) for w in wanted if w)
        word = "Yes" if hit else "No"
    if correct:
        return word
    return "No" if word != "No" else "Yes"


def answer_text(q: Question, correct: bool, seed: int) -> str:
    """The answer text for a recognised question (empty for filler)."""
    if q.kind == "capability":
        style = pick(12, seed, q.qid, "style")
        assert q.row is not None and q.dataset is not None
        return registry.get(q.dataset).sim_answer(q.row, correct, style)
    if q.kind.startswith("stress_"):
        return _stress(q, correct)
    if q.kind == "judge":
        return judge_word(q.gold[0], q.gold[1], correct)
    if q.kind == "extract":  # `capability --judge-self`: the response's last line, as a plain extractor reads it
        lines = [ln.strip() for ln in str(q.gold).splitlines() if ln.strip()]
        return lines[-1] if lines else "NONE"
    if q.kind == "echo":
        return str(q.gold)
    return ""
