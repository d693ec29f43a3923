"""MATH-500: the prompt is `prompts/math500.j2`; the answer is read from the text after the reasoning and judged
against the dataset's `answer` with math-verify.

Where the answer is read (each a stable rule name in `graded.jsonl`):
- `math500.boxed`: the last `\\boxed{}` / `\\fbox{}` (braces matched);
- `math500.multi_boxed`: a multi-part gold (`(8,-2)`, `3, 5, 7`) answered in several boxes of the final paragraph
  (`x = \\boxed{8}, y = \\boxed{-2}`): the last boxes, joined in order;
- `math500.answer_label`: no box, an answer stated after "Answer:" / "final answer is" / "answer is", or in bold
  on the final line (a conic's name, a word, a number);
- `math500.math_verify_fallback`: else math-verify's own final-answer extraction; nothing read is `unparsed`;
- `math500.corrected`: a correction after the answer that grades otherwise (ambiguous, both readings);
  `math500.retracted`: an answer retracted with no new one (`unparsed`).
The order is `reading_order.py`'s (the final channel; checks and pleasantries after the answer never read; a JSON
`answer` key, a table row or heading labelled "answer", an answer given first).
Equivalence is by value (math-verify's symbolic and numeric comparison): `\\frac{2}{4}` for `\\frac12`, `0.5` for
`\\frac{1}{2}`, `\\sqrt{50}` for `5\\sqrt{2}` count as correct; intervals and sets compare as such, and an
inequality equals the interval it describes (`x > 2` is `(2, \\infty)`); `\\text{}` units, `^\\circ`, `°`, `\\$`
and LaTeX thousands separators (`5{,}000`) are ignored; a repeating decimal is its fraction
(`0.\\overline{6}` is `\\frac{2}{3}`); a text answer compares without its article and case ("an Ellipse").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TypedDict

from evalkit_evals import reading_order
from evalkit_evals.datasets import DatasetItem, HubSource
from evalkit_evals.math_judge import MathJudge
from evalkit_evals.math_normalize import as_latex, normalize
from evalkit_evals.protocol import HubEval, Judges
from evalkit_evals.sample_answers import WRONG_MATH, plus_one
from evalkit_evals.verdict import Reading, Verdict

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
# Overlapping (a lookahead), and a label alone on its line labels the next line ("## Final Answer\n\n$x$").
_LABEL = re.compile(
    r"(?=(?:\bfinal answer\b|\banswer\b)[\"*_]*[ \t]*(?:is|:|=)?[ \t]*(?:\*\*|__)?[ \t]*(?:is|:)?[ \t]*([^\n]*)"
    r"(\n\s*[^\n]*)?)",
    re.IGNORECASE,
)
_BARE = re.compile(r"^[\s*_#:|\"]*$")
_EDGES = re.compile(r"^[\s|\":]+|[\s|\"]+$")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_END = re.compile(r"(?<!\\)\.\s|[,;]\s+(?=[A-Za-z]{3})|\s(?:because|since|which|as)\b")


def boxes(text: str) -> list[tuple[int, str]]:
    """(start, content) of every `\\boxed{...}` / `\\fbox{...}` whose braces close, in order."""
    out = []
    for m in _BOXED.finditer(text):
        depth = 1
        for i in range(m.end(), len(text)):
            c = text[i]
            if c == "{" and text[i - 1] != "\\":
                depth += 1
            elif c == "}" and text[i - 1] != "\\":
                depth -= 1
                if depth == 0:
                    out.append((m.start(), text[m.end() : i].strip()))
                    break
    return out


def last_boxed(text: str) -> str | None:
    """The content of the last `\\boxed{...}` or `\\fbox{...}`, braces matched; None when there is none."""
    found = boxes(text)
    return found[-1][1] if found else None


def _gold_parts(gold: str) -> tuple[int, bool]:
    """How many top-level comma-separated parts the gold has, and whether it is bracketed as a tuple."""
    g = re.sub(r"\\left|\\right|\\!|\s", "", gold)
    tuple_like = g.startswith("(") and g.endswith(")") and "\\cup" not in g
    inner = g[1:-1] if tuple_like else g
    depth, parts = 0, 1
    for i, c in enumerate(inner):
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        elif c == "," and depth == 0 and (tuple_like or not _thousands(inner, i)):
            parts += 1
    return parts, tuple_like


def _thousands(text: str, comma: int) -> bool:
    # "10,080": a comma followed by exactly three digits is a thousands separator in an untupled gold.
    return bool(re.match(r"\d{3}(?!\d)", text[comma + 1 :]))


def _multi_boxed(answer: str, gold: str) -> str | None:
    parts, tuple_like = _gold_parts(gold)
    found = boxes(answer)
    if parts < 2 or len(found) < parts:
        return None
    last = found[-parts:]
    between = answer[last[0][0] : last[-1][0]]
    if re.search(r"\n\s*\n", between) or any("," in b for _, b in last):
        return None  # boxes in different paragraphs, or boxes that already hold several parts
    joined = ", ".join(b for _, b in last)
    return f"({joined})" if tuple_like else joined


def _answer_like(text: str) -> str | None:
    """The stated text cut at its sentence's end, when it reads as an answer: math, or a few words."""
    t = _END.split(_EDGES.sub("", re.sub(r"\*\*|__", "", text)), 1)[0].strip().rstrip(".").strip()
    t = _EDGES.sub("", t)
    if re.match(r"^(?:\$|\\\(|\\\[|[-−\d(\\])", t):
        return t
    return t if t and re.match(r"^[A-Za-z][A-Za-z \-'()]*$", t) and len(t.split()) <= 4 else None


def _stated(answer: str) -> str | None:
    in_json = reading_order.json_answer(answer)
    if in_json is not None and _answer_like(in_json):
        return _answer_like(in_json)
    for m in reversed(list(_LABEL.finditer(answer))):
        text = _answer_like(m.group(2) if _BARE.match(m.group(1)) and m.group(2) else m.group(1))
        if text:
            return text
    lines = [ln for ln in answer.strip().splitlines() if ln.strip()]
    first = _BOLD.fullmatch(lines[0].strip()) if len(lines) > 1 else None
    if first and reading_order.EXPLANATION.match(lines[1]):
        return _answer_like(first.group(1))  # an answer given first, explained after
    for bold in reversed(_BOLD.findall(lines[-1]) if lines else []):
        text = _answer_like(bold)
        if text:
            return text
    return None


class MathGold(TypedDict):
    """What grading reads of a MATH-500 row (or a `math` user eval's gold): the answer, in LaTeX."""

    answer: str


class MathRow(MathGold):
    """A MATH-500 row: the problem, its answer (LaTeX), and where it came from: its id, subject and level."""

    problem: str
    solution: str
    subject: str
    level: int
    unique_id: str


def _read(row: MathGold, answer: str) -> tuple[str, str | None, str]:
    """(rule, extracted text, what math-verify is given) for an answer."""
    answer = reading_order.without_closing(answer)
    boxed = last_boxed(answer)
    if boxed is not None:
        multi = _multi_boxed(answer, row["answer"])
        if multi is not None:
            return "math500.multi_boxed", multi, f"$\\boxed{{{normalize(multi)}}}$"
        return "math500.boxed", boxed, f"$\\boxed{{{normalize(boxed)}}}$"
    stated = _stated(answer)
    if stated is not None:
        return "math500.answer_label", stated, as_latex(stated)
    return "math500.math_verify_fallback", None, normalize(answer)


def grade(row: MathGold, answer: str, judge: MathJudge) -> Verdict:
    """Read the final answer and ask math-verify whether it equals the gold `answer`, in `reading_order`: a
    correction after it that grades otherwise is a second reading (the grade follows the correction); a retraction
    with no new answer is `unparsed`."""
    fix = reading_order.correction(answer)
    if fix is not None:
        verdict = _grade(row, answer[: fix.start()], judge)
        value = _answer_like(fix.group("value"))
        other = judge.check(f"${row['answer'].strip()}$", as_latex(value)) if value else {}
        if other.get("pred") is not None and verdict.outcome in ("correct", "wrong"):
            if bool(other["ok"]) == verdict.correct:
                return verdict
            return Verdict(
                "correct" if other["ok"] else "wrong",
                value,
                f"math500.corrected: {verdict.extracted!r} ({verdict.rule}) corrected after it to {value!r}, "
                f"{'' if other['ok'] else 'not '}equivalent to the gold",
                rule="math500.corrected",
                readings=(Reading(verdict.rule, verdict.extracted), Reading("math500.corrected", value)),
            )
    cut = list(reading_order.RETRACTION.finditer(answer))
    if cut:
        # The rest of the retracting sentence explains it; a new answer comes after it.
        rest = answer[cut[-1].end() :]
        end = re.search(r"[.!?](?=\s|$)|\n", rest)
        rest = rest[end.end() :] if end else ""
        if re.search(r"[\d$\\]", rest):
            return _grade(row, rest, judge)
        before = _grade(row, answer[: cut[-1].start()], judge)
        if before.outcome in ("correct", "wrong"):
            return Verdict(
                "unparsed",
                before.extracted,
                f"math500.retracted: {before.extracted!r} was retracted and no new answer follows",
                rule="math500.retracted",
            )
    return _grade(row, answer, judge)


def _grade(row: MathGold, answer: str, judge: MathJudge) -> Verdict:
    gold = f"${row['answer'].strip()}$"
    rule, extracted, given = _read(row, answer)
    result = judge.check(gold, given)
    if rule == "math500.answer_label" and not result.get("pred") and "error" not in result:
        rule, extracted = "math500.math_verify_fallback", None
        result = judge.check(gold, normalize(answer))
    if "error" in result:
        return Verdict("error", extracted, result["error"], rule=rule)
    if result["pred"] is None:
        return Verdict("unparsed", extracted, f"{rule}: nothing math-verify could parse", rule=rule)
    extracted = extracted if extracted is not None else result["pred"]
    how = rule + (f" ({result['via']})" if result.get("via") else "")
    why = f"{how}: parsed {result['pred']}, gold {row['answer'].strip()} parsed {result['gold']}: " + (
        "equivalent" if result["ok"] else "not equivalent"
    )
    readings: tuple[Reading, ...] = ()
    after = _stated_after_box(answer)
    if rule in ("math500.boxed", "math500.multi_boxed") and after is not None:
        # "\boxed{5} ... Answer: 7": a stated answer after the box that grades differently is a second reading.
        other = judge.check(gold, as_latex(after))
        if other.get("pred") is not None and bool(other.get("ok")) != bool(result["ok"]):
            readings = (Reading(rule, extracted), Reading("math500.answer_label", after))
            why += f"; a stated answer after the box, {after!r}, is {'' if other['ok'] else 'not '}equivalent"
    return Verdict("correct" if result["ok"] else "wrong", extracted, why, rule=rule, readings=readings)


def _stated_after_box(answer: str) -> str | None:
    found = boxes(answer)
    if not found:
        return None
    start, content = found[-1]
    tail = answer[answer.find(content, start) + len(content) + 1 :]
    return _stated(tail) if _LABEL.search(tail) else None


@dataclass(frozen=True)
class MATH500(HubEval[MathRow]):
    """MATH-500's test split; ids `math500:<unique_id>`."""

    def qid(self, split: str, index: int, row: MathRow) -> str:
        """`math500:<unique_id>`."""
        return f"math500:{row['unique_id']}"

    def prompt_fields(self, row: MathRow) -> dict[str, str]:
        """The problem, stripped."""
        return {"problem": row["problem"].strip()}

    def grade(self, item: DatasetItem, answer: str, judges: Judges) -> Verdict:
        """The boxed (or stated) answer against the gold, by math-verify."""
        return grade(self.row(item), answer, judges.math)

    def sim_anchor(self, row: MathRow) -> tuple[str, str | None]:
        """The problem text."""
        return row["problem"].strip(), None

    def sim_answer(self, row: MathRow, correct: bool, style: int) -> str:
        """A line of working, then the gold boxed in one of three phrasings (wrong: a clearly different value)."""
        gold = row["answer"]
        ans = gold if correct else plus_one(gold)
        if not correct and ans.strip() == str(gold).strip():
            ans = WRONG_MATH
        pre = "Let me set up the problem and simplify step by step, checking each transformation."
        endings = [
            f"{pre}\n\nAfter simplifying, the final answer is $\\boxed{{{ans}}}$.",
            f"{pre}\n\nSo we obtain\n\\[\\boxed{{{ans}}}\\]",
            f"{pre}\n\nThe answer is $\\boxed{{{ans}}}$.",
        ]
        return endings[style % 3]


EVAL = MATH500(
    "math500",
    (
        HubSource(
            "HuggingFaceH4/MATH-500",
            None,
            "test",
            "6e4ed1a2a79af7d8630a6b768ec859cb5af4d3be",
            "HuggingFaceH4__MATH-500/test.jsonl",
        ),
    ),
)
