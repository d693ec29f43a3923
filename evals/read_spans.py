"""Where the readers look (issue #55): the places in an answer that may hold its final value, found the same way for
every reader family (`read_number`, `read_math`, `read_choice`). Each place is a `Span`: the reader's rule suffix,
its `sureness.Strength`, the text there, and its end offset; a family turns the text into its own value.

Places, by strength:
- MARKER: `####` (`hash`), the last box (`boxed`), "the answer is" / "Answer:" / "final answer" with a label alone
  on its line labelling the next (`label`, every hit, last first), a JSON `answer` key (`json`), an XML/HTML answer
  tag (`<answer>…</answer>`, `<final_answer>`, `<result>`: `tag`), a table row or heading labelled answer (`label`);
- PLAIN: bold in the final statement (`bold`, also `<b>`/`<strong>`), an answer given first and explained after
  (`first`), a short value alone in the last fence (`fence`);
- FALLBACK: the final statement line (`last_line`).
`later(answer, after)` gives the statements after the answer that conclude with a value ("so the answer should be
20", "it's actually 126"): a family reads them as `LATER` readings, the contradictions `sureness.decide` looks for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from evalkit_evals import reading_order
from evalkit_evals.sureness import WITHDRAWN, Found, Strength

_HASH = re.compile(r"####([^\n]*)")
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_LABEL = re.compile(
    r"(?=\b(?:final answer|answer)\b[\"*_]*[ \t]*(?:is\b|:|=|would be\b|will be\b)?[ \t]*(?:\*\*|__)?[ \t]*(?:is\b|:)?"
    r"[ \t]*([^\n]*)(\n\s*[^\n]*)?)",
    re.IGNORECASE,
)
_BARE = re.compile(r"^[\s*_#:|\"]*$")
_TAG = re.compile(
    r"<(answer|final_answer|final-answer|finalanswer|final|result)>\s*(.*?)\s*</\1>", re.IGNORECASE | re.DOTALL
)
# A question-and-answer transcript's answer line ("A: 8328", "Ans: 12").
_QA = re.compile(r"^[ \t]*(?:A|Ans\.?)[ \t]*[:：][ \t]*(\S[^\n]*)$", re.MULTILINE)
_HTML_BOLD = re.compile(r"<(b|strong)>(.*?)</\1>", re.IGNORECASE | re.DOTALL)
_BOLD = re.compile(r"\*\*(.+?)\*\*|__(.+?)__")
_FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)
_JSON_ANSWER = re.compile(r'"(?:final_?)?answer"\s*:\s*("(?:[^"\\]|\\.)*"|-?[\d.]+)', re.IGNORECASE)
# A statement after the answer that concludes with a value: a cue, a few words, then the value.
_LATER_CUE = re.compile(
    r"(?:\b(?:so|therefore|thus|hence|actually|instead|really)\b[,:]?|\banswer\b|\bshould (?:really )?be\b|"
    r"\bmust be\b|\bwould be\b|\bcorrect(?:ed)? (?:answer|value|total) is\b|\bfinal (?:answer|total|count) is\b)"
    r"[^\n.!?;]{0,60}?(?:\bis\b|\bbe\b|\bare\b|=|:|\bget\b|\bgives?\b|\bequals?\b|\bto\b|\bof\b|\bmakes?\b)\s*",
    re.IGNORECASE,
)
# The paragraph opens a re-check or a change of mind: only such a paragraph's conclusion contradicts the answer.
_RECHECK_OPEN = re.compile(
    r"^\W*(?:wait|hmm+|hold on|oh|oops|actually|on second thought|re-?reading|looking (?:at it )?again|"
    r"correction|no,|double[- ]?check\w*|let me (?:re\w+|double\w*|check|verify|reconsider)|let['’]s (?:re\w+|"
    r"double\w*|check|verify)|checking|re-?check\w*|verif\w*|sanity)(?!\w)",
    re.IGNORECASE,
)


# An answer that states it has none ("Cannot be determined", "unknown"): read as a declared non-answer.
_DECLINES = re.compile(
    r"^\W*(?:(?:it )?cannot be (?:determined|calculated|found|answered)|can['’]?t (?:be )?determine\w*|"
    r"(?:we |i )?cannot determine|unable to (?:determine|calculate|answer)|undetermin\w*|indetermin\w*|unknown|"
    r"nan|no (?:valid )?(?:solution|answer)|insufficient (?:information|data)|not enough information|"
    r"there is (?:an? )?(?:error|inconsistency|contradiction)|impossible to (?:determine|calculate)|error in|"
    r"the problem (?:setup |statement )?(?:is|has|leads|seems)|inconsistent)(?!\w)",
    re.IGNORECASE,
)


def declines(text: str) -> bool:
    """Whether an answer's text says there is no answer ("Cannot be determined", "Unable to determine")."""
    return bool(_DECLINES.match(text.strip().strip('"')))


@dataclass(frozen=True)
class Span:
    """A place that may hold the final value: the rule suffix, its strength, the text there, its end offset."""

    rule: str
    strength: Strength
    text: str
    at: int


def boxes(text: str) -> list[tuple[int, int, str]]:
    """(start, end, content) of every `\\boxed{...}` / `\\fbox{...}` whose braces close, in order."""
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
                    out.append((m.start(), i + 1, text[m.end() : i].strip()))
                    break
    return out


def statement_lines(answer: str) -> list[tuple[int, str]]:
    """(end offset, line) of the answer's non-empty lines without the trailing checks and pleasantries."""
    out, pos = [], 0
    for line in answer.splitlines(keepends=True):
        pos += len(line)
        if line.strip():
            out.append((pos, line.strip()))
    while len(out) > 1 and reading_order.closing_line(out[-1][1]):
        out.pop()
    return out


_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|\n")


def after_withdrawal(answer: str) -> int:
    """Where the answer starts again after the last place that takes one back ("Draft: 12. No, that draft is
    wrong: ...", the rest of that sentence explaining it), or 0 when nothing is taken back or nothing follows."""
    hits = list(reading_order.RETRACTION.finditer(answer))
    if not hits:
        return 0
    end = _SENTENCE_END.search(answer, hits[-1].end())
    start = end.end() if end else len(answer)
    return start if re.search(r"\w", answer[start:]) else 0


def spans(answer: str) -> list[Span]:
    """Every place of the module docstring in the answer (labels: every hit, the last first); after an answer
    taken back, only in what follows (offsets stay the whole answer's)."""
    base = after_withdrawal(answer)
    found = _spans(answer[base:])
    regions = _recheck_regions(answer[base:])
    return [
        Span(x.rule, Strength.LATER if any(a < x.at <= b for a, b in regions) else x.strength, x.text, x.at + base)
        for x in found
    ]


# A line that states the final answer anew ("#### 18", "Final answer: 18", "ANSWER: 2", a box).
_STATES_ANSWER = re.compile(r"^\W*(?:####|(?:the )?final answer\b|answer\s*[:：]|\\boxed\b|a\s*[:：])", re.IGNORECASE)


def _recheck_regions(answer: str) -> list[tuple[int, int]]:
    """(start, end) of each re-check: from a line that opens one to the end of its paragraph. What is read there is a
    later statement (`Strength.LATER`), never the answer's support."""
    out, pos, start = [], 0, None
    for line in answer.splitlines(keepends=True):
        if not line.strip():
            if start is not None:
                out.append((start, pos))
                start = None
        elif start is None and _RECHECK_OPEN.match(line):
            start = pos
        elif start is not None and _STATES_ANSWER.match(line):  # a new answer statement ends the re-check
            out.append((start, pos))
            start = None
        pos += len(line)
    if start is not None:
        out.append((start, pos))
    return out


def _spans(answer: str) -> list[Span]:
    found: list[Span] = []
    hashes = list(_HASH.finditer(answer))
    if hashes:
        found.append(Span("hash", Strength.MARKER, hashes[-1].group(1), hashes[-1].end()))
    bx = boxes(answer)
    if bx:
        found.append(Span("boxed", Strength.MARKER, bx[-1][2], bx[-1][1]))
    for m in reversed(list(_LABEL.finditer(answer))):
        if answer[max(0, m.start() - 1) : m.start()] == '"':
            continue  # a JSON key: read as JSON below
        if _BARE.match(m.group(1)) and m.group(2):
            found.append(Span("label", Strength.MARKER, m.group(2).strip(), m.end(2)))
        else:
            found.append(Span("label", Strength.MARKER, m.group(1), m.end(1)))
    js = list(_JSON_ANSWER.finditer(answer))
    if js:
        raw = js[-1].group(1)
        found.append(Span("json", Strength.MARKER, raw[1:-1] if raw.startswith('"') else raw, js[-1].end()))
    qa = list(_QA.finditer(answer))
    if qa:
        found.append(Span("qa", Strength.MARKER, qa[-1].group(1), qa[-1].end()))
    tags = list(_TAG.finditer(answer))
    if tags:
        found.append(Span("tag", Strength.MARKER, tags[-1].group(2), tags[-1].end()))
    lines = statement_lines(answer)
    if lines:
        end, last = lines[-1]
        bolds = [(b.group(1) or b.group(2), b.end()) for b in _BOLD.finditer(last)]
        bolds += [(b.group(2), b.end()) for b in _HTML_BOLD.finditer(last)]
        for text, _ in sorted(bolds, key=lambda t: -t[1]):
            found.append(Span("bold", Strength.PLAIN, text, end))
        found.append(Span("last_line", Strength.FALLBACK, last, end))
    if len(lines) > 1 and reading_order.EXPLANATION.match(lines[1][1]):
        found.append(Span("first", Strength.PLAIN, lines[0][1], lines[0][0]))
    fences = list(_FENCE.finditer(answer))
    if fences and len(fences[-1].group(1).strip().splitlines()) == 1 and len(fences[-1].group(1).strip()) <= 40:
        found.append(Span("fence", Strength.PLAIN, fences[-1].group(1).strip(), fences[-1].end()))
    return found


def withdrawn(answer: str, family: str) -> list[Found]:
    """A `LATER` reading (key `WITHDRAWN`) at every place that takes an answer back ("Wait, that's not right.",
    `reading_order.RETRACTION`): after the last value read, the grade is never sure."""
    return [
        Found(f"{family}.withdrawn", Strength.LATER, m.group(), WITHDRAWN, None, m.end())
        for m in reading_order.RETRACTION.finditer(answer)
    ]


def later(answer: str, after: int) -> list[Span]:
    """Statements after offset `after` that conclude with a value, in the lines of a re-check or a change of mind
    (from a line that opens one, "Double-checking the wording: …", to the end of its paragraph): the text after each
    cue ("… so it is 126"), to be read by a family."""
    out = []
    pos, open_ = after, False
    for line in answer[after:].splitlines(keepends=True):
        start = pos
        pos += len(line)
        if not line.strip():
            open_ = False
            continue
        open_ = open_ or bool(_RECHECK_OPEN.match(line))
        if open_:
            for m in _LATER_CUE.finditer(line):
                out.append(Span("recheck", Strength.LATER, line[m.end() :].split("\n", 1)[0], start + m.end()))
    return out
