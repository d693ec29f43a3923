"""GSM8K: the prompt is `prompts/gsm8k.j2`; this module loads the test split, reads the final number out of an
answer and scores it, and writes the sim's answers (`EVAL`, registered in `registry.py`).

The final answer as a person reads it, never a stray number in the working, in the order of `reading_order.py`.
Rules, first that fires wins (each has a stable name recorded in `graded.jsonl`):
- `gsm8k.hash_line`: the last `#### X`; `gsm8k.boxed`: the last `\\boxed{X}`; `gsm8k.answer_label`: the last
  "answer is X" / "Answer: X" / "**Answer:** X" / "final answer: X";
- `gsm8k.bold_final`: a bold number in the final statement (`**42 marbles**`);
- `gsm8k.answer_first`: an answer given on the first line and explained after ("**18**\\n\\nExplanation: ...");
- `gsm8k.last_line_number`: the last number of the final statement line.
The final statement line is the last line that is not a check ("Check: 48 / 4 = 12 ✓") or a pleasantry ("Hope this
helps!"). A calculation inside a marker is its result (`\\boxed{12 \\cdot 5 = 60}`, `Answer: 7 × 8 = 56`).
Numbers: thousands separators only in well-formed groups (`1,234,567`, `5{,}000`, or spaces between whole groups:
`36 500`), never read as a decimal point; currency signs, `%`, units and trailing periods are ignored; a sign
(`+5`, unicode minus, "negative 5") counts; `18.00` equals `18`; numbers in words ("twelve", "a dozen",
"two and a half", "negative three", "one million") count after a marker or on a final line without digits.
A compound quantity ("2 hours and 10 minutes") is converted to the unit the question asks for
(`gsm8k.compound_converted`), else it is `unparsed` (`gsm8k.compound_no_unit`). A final answer that names two
candidates (`15 or 20`) is `wrong` (`gsm8k.hedge`). An answer stated then retracted ("wait, that's not right")
with no new answer after is `unparsed` (`gsm8k.retracted`); one corrected after it ("Wait — it is 12") reads the
correction (`gsm8k.corrected`). When two markers read different numbers, or a correction differs from the answer,
the grade is `ambiguous` and both readings are recorded. Also read: a JSON `answer` key, a table row or heading
labelled "answer", `1.234,00` and `1'234`, `2.88e6` and `2.88 × 10^6`, `$1.45 million`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from decimal import Decimal, InvalidOperation
from typing import TypedDict

from evalkit_evals import number_words, quantity_units, reading_order
from evalkit_evals.datasets import DatasetItem, HubSource
from evalkit_evals.protocol import HubEval, Judges
from evalkit_evals.sample_answers import plus_one, with_commas
from evalkit_evals.verdict import Reading, Verdict, disagreeing

# Spaces as separators only between whole groups, and never before a unit glued on with a hyphen ("3 500-gram").
_SPACES = "[ \u2009\u202f\u00a0]"
# A dot between thousands groups with a decimal comma after them (`1.234,00`, as several European locales write).
_EU = r"\d{1,3}(?:\.\d{3})+,\d{1,2}(?![\d,])"
# Scientific notation after the digits: `2.88e6`, `2.88 × 10^6`, `2.88 \times 10^{6}`.
_SCI = r"(?:[eE][+]?\d+(?!\w)|\s*(?:[×x*·]|\\times|\\cdot)\s*10\s*\^\s*\{?[+]?\d+\}?)?"
_NUM = (
    r"[-−–+]?\$?\s?[-−–]?(?:" + _EU + r"|\d{1,3}(?:" + _SPACES + r"\d{3})+(?![\d-])"
    r"|\d{1,3}(?:(?:,|\{,\}|['’])\d{3})+(?!\d)|\d+)(?:\.\d+)?" + _SCI + r"|[-−–]?\.\d+"
)
_EU_RE = re.compile(r"[-−–+]?\$?\s?[-−–]?" + _EU)
_SCI_TAIL = re.compile(r"\s*(?:[×x*·]|\\times|\\cdot)\s*10\s*\^\s*\{?[+]?(\d+)\}?$")
# A magnitude word after the digits: `$1.45 million`.
_MAGNITUDE = re.compile(r"\s*(thousand|million|billion)\b", re.IGNORECASE)
_SCALE = {"thousand": 1000, "million": 10**6, "billion": 10**9}
_NUM_RE = re.compile(_NUM)
# Two candidates in the final answer: the read number followed (or preceded) by "or" / "/" and another number.
_HEDGE_AFTER = re.compile(r"\s*(?:,\s*)?\b(?:or|and/or)\b\s*(?:maybe\s+|perhaps\s+)?(?:\\?\$)?\s?\d")
_HEDGE_BEFORE = re.compile(r"\d[^\S\n]*(?:,\s*)?\b(?:or|and/or)\b\s*(?:maybe\s+|perhaps\s+)?(?:\\?\$)?\s?$")
# What may stand between a marker and its number: markup, math delimiters, a dollar, "is", "either".
_LEAD = re.compile(
    r"(?:\s|\*\*|__|\\\(|\\\[|\$\\boxed\{|\\boxed\{|\\text\{|\\\$|\$|[:=|\"#]|\bis\b|\beither\b)*", re.IGNORECASE
)
_HASH = re.compile(r"####([^\n]*)")
# Overlapping (a lookahead): "Final Answer: The final answer is $42$" holds two labels, the second one the answer.
_LABEL = re.compile(
    r"(?=\b(?:final answer|answer)\b[\"*_]*\s*(?:is|:|=|would be|will be)?([^\n]*)(\n\s*[^\n]*)?)", re.IGNORECASE
)
_BARE_LABEL = re.compile(r"^[\s*_#:|\"]*$")
_BOXED = re.compile(r"\\boxed\s*\{")
_BOLD = re.compile(r"\*\*(.+?)\*\*|__(.+?)__")
# A calculation written where the answer goes: digits, operators, brackets and `=`, the result after the last `=`.
_CALC = re.compile(r"[\s\d.,$()+\-−–*/×x÷·=]*(?:(?:\\cdot|\\times|\\div|\\\$)[\s\d.,$()+\-−–*/×x÷·=]*)*")
# After an answer given first: an explanation header. A plain first line needs an explicit one ("Here's how"), since
# a first line that restates the problem is often followed by "First, ..." or "Step 1".
_EXPLAIN = re.compile(
    r"^\W*(?:explanation|here['’]?s (?:how|why)|here is (?:how|why)|reasoning|why\b|because)", re.IGNORECASE
)
_EXPLAIN_AFTER_BOLD = re.compile(r"^\W*(?:step\s*1|solution|working|to (?:find|get|solve)|first\b)", re.IGNORECASE)
_RETRACT = reading_order.RETRACTION


_SIGN_WORD = re.compile(r"(?:negative|minus)\s+", re.IGNORECASE)
_CLAUSE_END = re.compile(r"[.,;:]\s")
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|\n")


def to_decimal(text: str) -> Decimal | None:
    """A number as written (`$1,234.00`, `−5`, `5{,}000`) as a Decimal, or None."""
    t = text.strip()
    if _EU_RE.fullmatch(t):
        t = t.replace(".", "").replace(",", ".")
    sci = _SCI_TAIL.search(t)
    if sci:
        t = t[: sci.start()] + "E" + sci.group(1)
    t = t.replace("{,}", "").replace("−", "-").replace("–", "-").replace("$", "").replace(",", "")
    t = re.sub(_SPACES, "", t.replace("'", "").replace("’", "")).rstrip(".")
    try:
        return Decimal(t)
    except InvalidOperation:
        return None


class GsmRow(TypedDict):
    """A GSM8K row: the question, and the worked answer that ends `#### N`."""

    question: str
    answer: str


def gold_answer(row: GsmRow) -> Decimal:
    """The number after `####` in the dataset's worked answer."""
    value = to_decimal(row["answer"].split("####")[-1].strip())
    assert value is not None, row["answer"]
    return value


@dataclass(frozen=True)
class FinalAnswer:
    """The final number read from an answer: its value, the rule that read it, its text, whether it was hedged,
    and the other markers' readings."""

    value: Decimal | None
    how: str
    raw: str | None
    hedged: bool = False
    note: str = ""
    readings: tuple[Reading, ...] = ()


def extract(answer: str, question: str = "") -> tuple[Decimal | None, str, str | None]:
    """(number, rule that read it, text read) from a chat answer; the number is None when nothing was read."""
    read = read_final(answer, question)
    return read.value, read.how, read.raw


def _fmt(value: Decimal) -> str:
    return format(value.normalize(), "f") if value == value.to_integral() else str(value)


def _quantity(seg: str, how: str, question: str, lead: bool = True) -> FinalAnswer | None:
    """The number a marker's text starts with (after markup), as the answer: a calculation's result, a compound
    quantity converted, a number in words; None when the text does not start with a number."""
    seg = seg.split("\n", 1)[0]
    start = 0
    if lead:
        markup = _LEAD.match(seg)
        assert markup is not None  # _LEAD matches the empty string too
        start = markup.end()
    sign = _SIGN_WORD.match(seg, start)
    if sign and _NUM_RE.match(seg, sign.end()):
        read = _quantity(seg[sign.end() :], how, question, lead=False)
        return (
            replace(read, value=-read.value, raw=seg[start : sign.end()] + (read.raw or ""))
            if read and read.value is not None
            else read
        )
    calc = _CALC.match(seg, start)
    expr = _CLAUSE_END.split(calc.group(), 1)[0] if calc else ""  # "18. 16 - 3 = 13" is an answer, then working
    if "=" in expr and _NUM_RE.search(expr.rsplit("=", 1)[1]):
        m = _NUM_RE.search(seg, start + expr.rindex("=") + 1)
        assert m is not None
        return FinalAnswer(to_decimal(m.group().strip()), how, m.group().strip(), note="a calculation's result")
    m = _NUM_RE.match(seg, start)
    if m:
        hedged = bool(_HEDGE_AFTER.match(seg, m.end()))
        raw = seg[m.start() :].strip().rstrip(".") if hedged else m.group().strip()
        compound = quantity_units.compound_at(seg, m.start())
        if compound and not hedged:
            return _compound(compound, question)
        return FinalAnswer(_scaled(seg, m), how, raw, hedged)
    words = number_words.parse_at(seg, start)
    if words is not None:
        value, end = words
        compound = quantity_units.compound_at(seg, start)
        if compound:
            return _compound(compound, question)
        return FinalAnswer(value, how, seg[start:end].strip(), bool(_HEDGE_AFTER.match(seg, end)), "in words")
    return None


def _scaled(text: str, m: re.Match[str]) -> Decimal | None:
    """The number `m` read in `text`, times the magnitude word after it (`$1.45 million`)."""
    value = to_decimal(m.group().strip())
    scale = _MAGNITUDE.match(text, m.end())
    return value * _SCALE[scale.group(1).lower()] if value is not None and scale else value


def _compound(c: quantity_units.Compound, question: str) -> FinalAnswer:
    target = quantity_units.asked_unit(question, c.family)
    if target is None:
        return FinalAnswer(
            None,
            "gsm8k.compound_no_unit",
            c.text,
            note=f"a compound quantity ({c.text!r}) and the question names no {c.family} unit",
        )
    value = c.in_unit(target)
    return FinalAnswer(value, "gsm8k.compound_converted", c.text, note=f"{c.text!r} in {target}")


def _last_boxed(text: str) -> str | None:
    starts = [m.end() for m in _BOXED.finditer(text)]
    for start in reversed(starts):
        depth = 1
        for i in range(start, len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    return text[start:i]
    return None


def _statement_lines(answer: str) -> list[str]:
    """The answer's non-empty lines without the trailing checks and pleasantries (they never replace an answer)."""
    lines = [ln for ln in answer.strip().splitlines() if ln.strip()]
    while len(lines) > 1 and reading_order.closing_line(lines[-1]):
        lines.pop()
    return lines


def _markers(answer: str, question: str) -> list[FinalAnswer]:
    """Every marker's reading, in priority order (####, \\boxed{}, an answer label, a bold final statement)."""
    found = []
    for m in reversed(list(_HASH.finditer(answer))):
        read = _quantity(m.group(1), "gsm8k.hash_line", question)
        if read:
            found.append(read)
            break
    boxed = _last_boxed(answer)
    if boxed is not None:
        inner = re.sub(r"\\(?:text|mathrm|textbf)\{([^{}]*)\}", r"\1", boxed)
        read = _quantity(inner.replace("\\$", "$").replace("\\!", ""), "gsm8k.boxed", question)
        if read:
            found.append(read)
    for m in reversed(list(_LABEL.finditer(answer))):
        text = m.group(1) if not _BARE_LABEL.match(m.group(1)) or not m.group(2) else m.group(2).strip()
        read = _quantity(text, "gsm8k.answer_label", question)
        if read:
            found.append(read)
            break
    lines = _statement_lines(answer)
    if lines:
        for b in reversed(list(_BOLD.finditer(lines[-1]))):
            read = _quantity(b.group(1) or b.group(2), "gsm8k.bold_final", question)
            if read:
                found.append(read)
                break
    return found


def _answer_first(lines: list[str], question: str) -> FinalAnswer | None:
    # "**18**\n\nExplanation: ..." or "Janet makes $18 a day.\n\nHere's how: ...": the first line is the answer.
    if len(lines) < 2:
        return None
    bold = _BOLD.fullmatch(lines[0].strip())
    if bold and (_EXPLAIN.match(lines[1]) or _EXPLAIN_AFTER_BOLD.match(lines[1])):
        return _quantity(bold.group(1) or bold.group(2), "gsm8k.answer_first", question)
    if not _EXPLAIN.match(lines[1]):
        return None
    nums = _NUM_RE.findall(lines[0])
    return FinalAnswer(to_decimal(nums[0].strip()), "gsm8k.answer_first", nums[0].strip()) if len(nums) == 1 else None


def _last_line(line: str, question: str) -> FinalAnswer | None:
    hits = list(_NUM_RE.finditer(line))
    if hits:
        m = hits[-1]
        for c in quantity_units.compounds(line):
            if c.start <= m.start() < c.end:
                return _compound(c, question)
        hedged = bool(_HEDGE_BEFORE.search(line[: m.start()]) or _HEDGE_AFTER.match(line, m.end()))
        raw = line.strip().rstrip(".") if hedged else m.group().strip()
        return FinalAnswer(_scaled(line, m), "gsm8k.last_line_number", raw, hedged)
    words = number_words.last_in(line)
    if words is not None:
        value, start, end = words
        return FinalAnswer(value, "gsm8k.last_line_number", line[start:end].strip(), note="in words")
    return None


def _read(answer: str, question: str) -> FinalAnswer:
    found = _markers(answer, question)
    if found:
        values = [Reading(f.how, None if f.value is None else _fmt(f.value)) for f in found if not f.hedged]
        return replace(found[0], readings=disagreeing(values))
    lines = _statement_lines(answer)
    read = _answer_first(lines, question) or (_last_line(lines[-1], question) if lines else None)
    return read or FinalAnswer(None, "gsm8k.no_number", None)


def read_final(answer: str, question: str = "") -> FinalAnswer:
    """The final answer's number, with `hedged` set when another candidate stands beside it ("15 or 20"); an
    answer retracted with no new one after is no answer; an answer corrected to another number after it
    ("Wait — it is 12") reads the correction, with both readings kept (`reading_order`)."""
    fix = reading_order.correction(answer)
    if fix is not None:
        corrected = _quantity(fix.group("value"), "gsm8k.corrected", question)
        before = _read_retracted(answer[: fix.start()], question)
        if corrected and corrected.value is not None and before.value is not None and not before.hedged:
            if corrected.value == before.value:
                return before
            return replace(
                corrected,
                note=f"{_fmt(before.value)} ({before.how}) corrected after it to {_fmt(corrected.value)}",
                readings=(Reading(before.how, _fmt(before.value)), Reading("gsm8k.corrected", _fmt(corrected.value))),
            )
    return _read_retracted(answer, question)


def _read_retracted(answer: str, question: str) -> FinalAnswer:
    retractions = list(_RETRACT.finditer(answer))
    if retractions:
        cut = retractions[-1]
        after = answer[cut.end() :]
        # The rest of the retracting sentence explains it ("... since she only has 16 eggs"): a new answer is a
        # marker, or the final statement of a later sentence.
        end = _SENTENCE_END.search(after)
        found = _markers(after, question)
        read = found[0] if found else _read(after[end.end() :], question) if end else None
        if read is not None and (read.value is not None or read.hedged or read.how != "gsm8k.no_number"):
            return read
        before = _read(answer[: cut.start()], question)
        if before.value is not None:
            return FinalAnswer(
                None,
                "gsm8k.retracted",
                before.raw,
                note=f"{_fmt(before.value)} was retracted ({cut.group().strip()!r}) and no new answer follows",
            )
    return _read(answer, question)


def grade(row: GsmRow, answer: str) -> Verdict:
    """Compare the extracted number with the gold `####` number exactly (as decimals)."""
    gold = _fmt(gold_answer(row))
    read = read_final(answer, row.get("question") or "")
    how = read.how + (f" ({read.note})" if read.note else "")
    if read.hedged:
        cands = tuple(Reading(read.how, _fmt(to_decimal(n) or Decimal(0))) for n in _NUM_RE.findall(read.raw or ""))
        return Verdict(
            "wrong",
            read.raw,
            f"{how}: {read.raw!r} names more than one candidate; gold {gold}",
            rule="gsm8k.hedge",
            readings=disagreeing(list(cands)),
        )
    if read.value is None:
        return Verdict("unparsed", read.raw, how, rule=read.how)
    text = _fmt(read.value)
    readings = read.readings
    why = f"{how}: read {read.raw!r} = {text}, gold {gold}"
    if readings:
        why += "; other readings: " + ", ".join(f"{r.rule} {r.value}" for r in readings[1:])
    return Verdict(
        "correct" if read.value == gold_answer(row) else "wrong", text, why, rule=read.how, readings=readings
    )


@dataclass(frozen=True)
class GSM8K(HubEval[GsmRow]):
    """GSM8K's test split; ids `gsm8k:<row index>`."""

    def prompt_fields(self, row: GsmRow) -> dict[str, str]:
        """The question, stripped."""
        return {"question": row["question"].strip()}

    def grade(self, item: DatasetItem, answer: str, judges: Judges) -> Verdict:
        """The final number against the `####` gold."""
        return grade(self.row(item), answer)

    def sim_anchor(self, row: GsmRow) -> tuple[str, str | None]:
        """The question text."""
        return row["question"].strip(), None

    def sim_answer(self, row: GsmRow, correct: bool, style: int) -> str:
        """The worked solution then `#### N`, `The answer is N.`, `$\\boxed{N}$` or `**Answer:** $N` (wrong: gold+1)."""
        gold = row["answer"].split("####")[-1].strip().replace(",", "")
        work = re.sub(r"<<[^>]*>>", "", row["answer"].split("####")[0]).strip()
        n = gold if correct else plus_one(gold)
        endings = [
            f"#### {n}",
            f"The answer is {with_commas(n)}.",
            f"$\\boxed{{{n}}}$",
            f"**Answer:** ${with_commas(n)}",
        ]
        return f"{work}\n{endings[style % 4]}"


EVAL = GSM8K(
    "gsm8k",
    (
        HubSource(
            "openai/gsm8k", "main", "test", "cc7b047b6e5bb11b4f1af84efc572db110a51b3c", "openai__gsm8k/test.jsonl"
        ),
    ),
)
