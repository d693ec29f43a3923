"""MuSR: the three splits, the MuSR authors' numbered-choice prompt (`prompts/musr.j2`), a final-answer parse a
careful human would agree with, and the sim's answers (`EVAL`).

Where the answer is read, in the order of `reading_order.py` (each a stable rule name in `graded.jsonl`):
- `musr.answer_line`: the last `ANSWER:` line (any case, markdown bold allowed; an empty one reads the next line,
  a bullet) or `\\boxed{n}`;
- `musr.corrected`: a correction after the answer ("Wait — it is Ana"), both readings kept (ambiguous);
  `musr.retracted`: an answer retracted with no new one, `unparsed`;
- `musr.reconsidered`: a statement after that line that changes it ("... so my final answer is 1") wins;
- `musr.stated_answer`: with no `ANSWER:` line, a last line that states the answer ("The answer is the kitchen
  drawer.");
- `musr.prose_conclusion`: else the conclusion of the last paragraph, a sentence that concludes ("So the thief
  must have been Ana.", "Therefore, ...", "... most likely ...") and names exactly one choice.
How the text is read: a number comes first (`3`, `(3)`, `3 - Priya`, `3 (Priya)`, `Option 3`, `Choice 3`; rule
`musr.option_number` for the last two); a number outside 1..n is `unparsed` (`musr.number_out_of_range`); a number
whose text names another choice (`2 (Mackenzie)` when Mackenzie is 1) is `wrong` and both readings are recorded
(`musr.number_text_conflict`). Otherwise the text is matched against the choices (trimmed, any case): its exact
text, or exactly one choice named in it (the longer match winning where one choice's text holds another's,
whole words only); a choice rejected beside it (`X, not Y`, `X rather than Y`) is not named. Team allocations
match in any order of roles and names (`musr.team_assignment`). Two different choices named is `wrong`
(`musr.hedge`); a choice named only in the prose, with no answer statement or concluding sentence, gets no credit
(`musr.no_answer`), and there is no random fallback. Two choices whose trimmed texts are equal (a few rows list
'pantry' and 'pantry ') are the same answer.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, replace
from typing import TypedDict

from evalkit_evals import reading_order, team_allocation
from evalkit_evals.datasets import DatasetItem, HubSource
from evalkit_evals.protocol import HubEval, Judges
from evalkit_evals.verdict import Reading, Verdict, disagreeing

SPLITS = ("murder_mysteries", "object_placements", "team_allocation")


class MusrRow(TypedDict):
    """A MuSR row: the narrative, the question, the choices (a Python list literal in a string on the Hub), and
    the right choice's 0-based index and text."""

    narrative: str
    question: str
    choices: str | list[str]
    answer_index: int
    answer_choice: str


def musr_choices(row: MusrRow) -> list[str]:
    """MuSR's `choices` column is a Python list literal in a string."""
    value = row["choices"]
    return list(ast.literal_eval(value)) if isinstance(value, str) else list(value)


_ANSWER = re.compile(r"answer\s*[:：][ \t]*(?:\*\*|__)?[ \t]*\(?[ \t]*([^\n]*?)[ \t]*$", re.IGNORECASE | re.MULTILINE)
# A line that states the answer without the asked-for label: "The answer is X", "My final answer is X".
_STATED = re.compile(r"\banswer\s+(?:is|would be|must be|will be)\s*[:：]?\s*(.+)$", re.IGNORECASE)
_RESTATED = re.compile(
    r"(?:\banswer\s+(?:is|would be|must be|will be)\b|\bchange my answer to\b|"
    r"\bi(?:'ll| will) go with\b)\s*[:：]?\s*([^\n]+)",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"^\(?(\d+)(?:\)(.*)|\s*[-–—.:]\s*(.*)|\s*\((.*)\)\s*)?$")
_OPTION = re.compile(r"^(?:option|choice)\s*(?:#|no\.?|number)?\s*(?=\(?\d)", re.IGNORECASE)
_TEXT_NUMBER = re.compile(r"^(.+?)\s*[(\[]\s*(?:option\s*|choice\s*)?#?(\d+)\s*[)\]]$", re.IGNORECASE)
# The reason given after an answer ("Mackenzie, because Ana was never near the study") names no answer.
_REASON = re.compile(r",?\s+\b(?:because|since|given that|whereas|while)\b", re.IGNORECASE)
_LEADING_REASON = re.compile(r"^\W*(?:given that|since|because|considering that|now that)\b[^,]*,\s*", re.IGNORECASE)
_MARKUP = re.compile(r"\*\*|__|`")
_QUOTES = "\"'“”‘’"
_REJECTED_BEFORE = re.compile(
    r"(?:\bnot|\brather than|\binstead of|\bover|\bbut not|n['’]t|\bnever)\s+"
    r"(?:(?:have\s+)?been\s+|be\s+)?(?:the\s+|by\s+)?$",
    re.IGNORECASE,
)
_CONCLUDES = re.compile(
    r"^\W*(?:so|therefore|thus|hence|in conclusion|in summary|to conclude|overall|ultimately|"
    r"all things considered|putting (?:it|this|everything) (?:all )?together|based on|given|"
    r"considering|the evidence (?:points|suggests))\b|\bmust (?:have )?be(?:en)?\b|"
    r"\bmost (?:likely|probably)\b|\bi(?:['’]ll| will)? (?:choose|pick|select|go with)\b|"
    # a conclusion with no connective: "Mia is the option that fits every clue."
    r"\b(?:is|was) the (?:\w+ )?(?:option|answer|choice|one|culprit|killer|murderer|suspect|location|place|spot)\b|"
    r"\bfits (?:every|all|each|the)\b",
    re.IGNORECASE,
)
_PLEASANTRY = re.compile(
    r"^\W*(?:i hope|hope (?:this|that)|let me know|feel free|thank(?:s| you)|"
    r"happy to|glad to|enjoy|good luck|what a)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class ChoiceRead:
    """What the final answer names: `choice` (1-based) or None, `hedged` when it names two or more choices,
    `rule` the stable name of the rule that read it, `readings` when two readings disagree."""

    choice: int | None
    how: str
    raw: str | None
    hedged: tuple[int, ...] = ()
    rule: str = "musr.no_answer"
    readings: tuple[Reading, ...] = ()


def fold(text: str) -> str:
    """Text for comparing: any case, curly apostrophes as straight ones ("producer’s desk" is "producer's desk")."""
    return text.replace("’", "'").replace("‘", "'").lower()


def _clean(text: str) -> str:
    text = _MARKUP.sub("", text).strip().rstrip(".!").strip()
    return text.strip(_QUOTES).strip()


def _spans(text: str, choices: list[str]) -> list[tuple[int, int, int]]:
    low = fold(text)
    spans: list[tuple[int, int, int]] = []
    for i, choice in sorted(enumerate(choices, 1), key=lambda ic: -len(ic[1].strip())):
        needle = fold(choice.strip())
        if not needle:
            continue
        for m in re.finditer(r"(?<!\w)" + re.escape(needle) + r"(?!\w)", low):
            if all(m.end() <= s or m.start() >= e for s, e, _ in spans):
                spans.append((m.start(), m.end(), i))
    return sorted(spans)


def named_choices(text: str, choices: list[str]) -> list[int]:
    """The distinct 1-based choices whose trimmed text appears in `text` as whole words, longest match first
    claiming its span, in order of appearance; a choice only rejected ("not Y", "rather than Y") is left out."""
    kept = [i for s, _, i in _spans(text, choices) if not _REJECTED_BEFORE.search(text[max(0, s - 20) : s])]
    return list(dict.fromkeys(kept))


def _same(choices: list[str], a: int, b: int) -> bool:
    return a == b or fold(choices[a - 1].strip()) == fold(choices[b - 1].strip())


def _squash(text: str) -> str:
    return re.sub(r"[\W_]+", "", fold(text))


def _by_text(text: str, choices: list[str], where: str, rule: str) -> ChoiceRead:
    exact = [i for i, c in enumerate(choices, 1) if fold(c.strip()) == fold(text)]
    if len(exact) == 1:
        return ChoiceRead(exact[0], f"exact choice text {where}", text, rule=rule)
    # Another spelling or spacing of one choice ("toybox", "toy-box" for "toy box").
    spelled = {_squash(c) for i, c in enumerate(choices, 1) if _squash(c) == _squash(text) and _squash(text)}
    alike = [i for i, c in enumerate(choices, 1) if _squash(c) in spelled]
    if spelled and len({_squash(choices[i - 1]) for i in alike}) == 1:
        return ChoiceRead(alike[0], f"choice text {where}, spelled or spaced otherwise", text, rule=rule)
    team = team_allocation.match(text, choices)
    if team is not None:
        return ChoiceRead(
            team, f"team allocation {where} (roles and names in any order)", text, rule="musr.team_assignment"
        )
    named = named_choices(text, choices)
    if len(named) == 1:
        return ChoiceRead(named[0], f"one choice named {where}", text, rule=rule)
    if len(named) > 1:
        return ChoiceRead(None, f"{len(named)} different choices named {where}", text, tuple(named), rule="musr.hedge")
    return ChoiceRead(None, f"{where}: neither a choice number nor a choice's text", text, rule="musr.not_a_choice")


def _read_text(raw: str, choices: list[str], where: str, rule: str) -> ChoiceRead:
    text = _clean(_claim(raw))
    option = _OPTION.match(text)
    if option:
        text, rule = text[option.end() :], "musr.option_number"
    m = _NUMBER.match(text)
    if not m:
        tail = _TEXT_NUMBER.match(text)  # "Mackenzie (1)": the text, then its number
        if not tail:
            return _by_text(text, choices, where, rule)
        n, said = int(tail.group(2)), tail.group(1)
        return _number_and_text(n, said, text, choices, where, rule)
    n = int(m.group(1))
    return _number_and_text(n, next((g for g in m.groups()[1:] if g), ""), text, choices, where, rule)


def _number_and_text(n: int, said: str, text: str, choices: list[str], where: str, rule: str) -> ChoiceRead:
    if not 1 <= n <= len(choices):
        return ChoiceRead(None, f"choice number {n} outside 1..{len(choices)}", text, rule="musr.number_out_of_range")
    said = _clean(said).strip("()").strip()
    if said:
        by_text = _by_text(said, choices, "beside the number", rule)
        if by_text.choice is not None and not _same(choices, n, by_text.choice):
            return ChoiceRead(
                n,
                f"choice number {n} {where}, but its text names choice {by_text.choice}",
                text,
                rule="musr.number_text_conflict",
                readings=(Reading("musr.choice_number", str(n)), Reading("musr.choice_text", str(by_text.choice))),
            )
    return ChoiceRead(n, f"choice number {where}", text, rule=rule)


def _claim(text: str) -> str:
    """The sentence without its reasons ("Given that Ana had an alibi, X ...", "X, because Ana ...")."""
    return _REASON.split(_LEADING_REASON.sub("", text), 1)[0]


def _names_first(text: str, choices: list[str]) -> bool:
    """Whether a restatement starts with its answer ("is 1", "is the kitchen"), not with prose that merely
    mentions a choice later ("would be different if Ana ...")."""
    t = fold(re.sub(r"^(?:the|a|an)\s+", "", _clean(text), flags=re.IGNORECASE))
    return bool(re.match(r"^(?:\(?\d|option\b|choice\b)", t)) or any(
        t.startswith(re.sub(r"^(?:the|a|an)\s+", "", fold(c.strip()))) for c in choices if c.strip()
    )


def _lines(answer: str) -> list[str]:
    lines = [ln for ln in answer.strip().splitlines() if ln.strip()]
    while len(lines) > 1 and _PLEASANTRY.match(_MARKUP.sub("", lines[-1])):
        lines.pop()
    return lines


def _conclusion(answer: str, choices: list[str]) -> ChoiceRead | None:
    paragraphs = [p for p in re.split(r"\n\s*\n", "\n".join(_lines(answer))) if p.strip()]
    if not paragraphs:
        return None
    sentences = [s for s in re.split(r"(?<=[.!?])\s+|\n", _MARKUP.sub("", paragraphs[-1])) if s.strip()]
    for s in reversed(sentences):
        if not _spans(s, choices):
            continue
        if not _CONCLUDES.search(s):
            return None  # the last sentence naming a choice does not conclude: prose, no credit
        read = _by_text(_clean(_claim(s)), choices, "in the concluding sentence", "musr.prose_conclusion")
        return read if read.choice is not None or read.hedged else None
    return None


_BOXED = re.compile(r"\\boxed\s*\{([^{}]*)\}")
_NEXT_LINE = re.compile(r"[ \t]*\n\s*(?:[-*•][ \t]+)?([^\n]+)")


def _answer_lines(answer: str, choices: list[str]) -> list[tuple[int, str]]:
    """(end, text) of each explicit answer, in order: an `ANSWER:` line (one left empty holds its answer on the
    next line, often a bullet; one whose next line names no choice is a heading) or a `\boxed{}`."""
    hits = []
    for m in _ANSWER.finditer(answer):
        text, end = m.group(1), m.end()
        if not _clean(text):
            nxt = _NEXT_LINE.match(answer, end)
            if nxt is None:
                continue
            text, end = nxt.group(1), nxt.end()
            read = _read_text(text, choices, "", "")
            if read.choice is None and not read.hedged:
                continue
        hits.append((m.start(), end, text))
    hits += [(m.start(), m.end(), m.group(1)) for m in _BOXED.finditer(answer)]
    return [(end, text) for _, end, text in sorted(hits)]


def extract(answer: str, choices: list[str]) -> ChoiceRead:
    """The choice read in `reading_order`: the last explicit answer (or a later restatement), else a last line
    that states it, else the concluding sentence; a correction after it names a second reading, a retraction
    with no new answer leaves none."""
    fix = reading_order.correction(answer)
    if fix is not None:
        before = _extract(answer[: fix.start()], choices)
        new = _read_text(fix.group("value"), choices, "in a correction after the answer", "musr.corrected")
        if before.choice is not None and new.choice is not None and not before.readings:
            if _same(choices, before.choice, new.choice):
                return before
            return replace(
                new,
                rule="musr.corrected",
                readings=(Reading(before.rule, str(before.choice)), Reading("musr.corrected", str(new.choice))),
            )
    cut = list(reading_order.RETRACTION.finditer(answer))
    if cut:
        after = _extract(answer[cut[-1].end() :], choices)
        if after.choice is not None or after.hedged:
            return after
        before = _extract(answer[: cut[-1].start()], choices)
        if before.choice is not None:
            return ChoiceRead(
                None,
                f"choice {before.choice} was retracted and no new answer follows",
                before.raw,
                rule="musr.retracted",
            )
    return _extract(answer, choices)


def _extract(answer: str, choices: list[str]) -> ChoiceRead:
    hits = _answer_lines(answer, choices)
    if hits:
        read = _read_text(hits[-1][1], choices, "after ANSWER:", "musr.answer_line")
        later = [
            _read_text(m.group(1), choices, "in a later restatement", "musr.reconsidered")
            for m in _RESTATED.finditer(answer, hits[-1][0])
            if _names_first(m.group(1), choices)
        ]
        later = [x for x in later if x.choice is not None or x.hedged]
        if (
            later
            and later[-1].choice is not None
            and read.choice is not None
            and _same(choices, later[-1].choice, read.choice)
            and not later[-1].readings
        ):
            return read  # a restatement that agrees changes nothing
        if later:
            new = later[-1]
            rule = new.rule if new.rule in ("musr.hedge", "musr.number_text_conflict") else "musr.reconsidered"
            first = Reading("musr.answer_line", None if read.choice is None else str(read.choice))
            return replace(
                new,
                rule=rule,
                readings=new.readings
                or disagreeing([first, Reading("musr.reconsidered", None if new.choice is None else str(new.choice))]),
            )
        return read
    lines = _lines(answer)
    stated = _STATED.search(_MARKUP.sub("", lines[-1])) if lines else None
    if stated:
        return _read_text(stated.group(1), choices, "in the last line's 'answer is'", "musr.stated_answer")
    return _conclusion(answer, choices) or ChoiceRead(None, "no 'ANSWER:' line and no concluding sentence", None)


def grade(row: MusrRow, answer: str) -> Verdict:
    """Right when the chosen number is `answer_index + 1`; a hedge between choices, or a number that contradicts
    the text beside it, is wrong."""
    choices = musr_choices(row)
    gold = int(row["answer_index"]) + 1
    read = extract(answer, choices)
    gold_text = f"gold {gold} ({choices[gold - 1].strip()!r})"
    if read.hedged:
        named = ", ".join(f"{i} ({choices[i - 1].strip()!r})" for i in read.hedged)
        return Verdict(
            "wrong",
            " | ".join(str(i) for i in read.hedged),
            f"{read.how}: {named}; {gold_text}",
            rule=read.rule,
            readings=tuple(Reading("musr.hedge", str(i)) for i in read.hedged),
        )
    if read.choice is None:
        return Verdict("unparsed", read.raw, read.how, rule=read.rule)
    n = read.choice
    if read.rule == "musr.number_text_conflict":
        return Verdict(
            "wrong",
            str(n),
            f"{read.how} (contradictory: never the number alone); {gold_text}",
            rule=read.rule,
            readings=read.readings,
        )
    # Some rows list one place twice, once with a trailing space ('pantry', 'pantry '): the same answer.
    return Verdict(
        "correct" if _same(choices, n, gold) else "wrong",
        str(n),
        f"{read.how}: {n} ({choices[n - 1].strip()!r}), {gold_text}",
        rule=read.rule,
        readings=read.readings,
    )


@dataclass(frozen=True)
class MuSR(HubEval[MusrRow]):
    """MuSR's three splits in order; ids `musr:<split>/<row index>`."""

    def qid(self, split: str, index: int, row: MusrRow) -> str:
        """`musr:<split>/<row index>`."""
        return f"musr:{split}/{index}"

    def prompt_fields(self, row: MusrRow) -> dict[str, str | list[str]]:
        """The narrative, the question and the choices."""
        return {
            "narrative": row["narrative"].strip(),
            "question": row["question"].strip(),
            "choices": musr_choices(row),
        }

    def grade(self, item: DatasetItem, answer: str, judges: Judges) -> Verdict:
        """The chosen number against `answer_index + 1`."""
        return grade(self.row(item), answer)

    def sim_anchor(self, row: MusrRow) -> tuple[str, str | None]:
        """The narrative, and the question must be there too (several questions share a narrative)."""
        return row["narrative"].strip(), row["question"].strip()

    def sim_answer(self, row: MusrRow, correct: bool, style: int) -> str:
        """A sentence naming the choice, then `ANSWER: n`, `**ANSWER: n**` or `Answer: n` (wrong: the next choice)."""
        choices, idx = musr_choices(row), int(row["answer_index"])
        k = idx if correct else (idx + 1) % len(choices)
        lines = [f"ANSWER: {k + 1}", f"**ANSWER: {k + 1}**", f"Answer: {k + 1}"]
        return f"Weighing every clue in the story, the most consistent option is {choices[k]}.\n\n{lines[style % 3]}"


EVAL = MuSR(
    "musr",
    tuple(
        HubSource("TAUR-Lab/MuSR", None, s, "7c365b439a222150f317764d4f16ae6c96d7d94a", f"TAUR-Lab__MuSR/{s}.jsonl")
        for s in SPLITS
    ),
)
