"""Several independent readings, one grade (issue #55): what makes a grade *sure*.

Every reader that applies reads every answer and records what it found (`Found`): the rule, the value as text (None
for nothing), how strong a reader it is (`Strength`), where in the answer it read, and whether that value is right
against the gold. `decide` turns the readings and the rules' verdict into one claim:

- a grade is **sure** only when the strongest readings that found a value agree with each other and with the value
  the rules graded, and no later text contradicts them (a correction, a hedge, a retraction, a re-check that
  changes the answer: readings of strength `LATER`);
- a fallback (`FALLBACK`: the last number of the last line, math-verify over the whole text) alone is never sure;
- an answer the rules left unread is graded by the readers' value when the strongest non-fallback readings agree on
  one (sure); else, and for an answer withdrawn, it stays `unparsed` and unsure; a request that failed (`error`) is
  sure (nothing to read);
- otherwise the grade is **unsure**, and every reading is kept on the line for a person or a judge.

The rules' verdict (`correct`, `outcome`) stays the grade; a contradicting reading that comes last (the model's last
word, e.g. a re-check paragraph that changes the answer) replaces it, unsure, with both readings kept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import IntEnum

from evalkit_evals.verdict import Reading, Verdict


class Strength(IntEnum):
    """How much a reading is worth. Only the strongest readings that found a value decide; `LATER` readings are text
    after the answer that states another value (never the grade's support, only its contradiction)."""

    FALLBACK = 0  # a guess: the last number of the last line, math-verify over the whole text
    PLAIN = 1  # bold in the final statement, an answer given first, a value alone in a fence, a concluding sentence
    MARKER = 2  # an explicit final marker: ####, a box, ANSWER:, "the answer is", JSON, a table/heading, a tag
    LATER = 3  # text after the answer that names another value: a correction, a re-check that changes it


@dataclass(frozen=True)
class Found:
    """One reader's reading of one answer. `value` is the text read (None: the reader found nothing); `key` is what
    readings are compared by (equal keys read the same answer: the same number, the same choice, or both equal to the
    gold for math); `correct` is the value scored against the gold (None when nothing was read); `at` is the offset
    in the answer just after what was read."""

    rule: str
    strength: Strength
    value: str | None
    key: str | None = None
    correct: bool | None = None
    at: int = 0

    def reading(self) -> Reading:
        """As a `readings` entry of a graded line."""
        return Reading(self.rule, self.value, self.strength.name.lower(), self.correct)


WITHDRAWN = "withdrawn"  # the key of a `LATER` reading that takes the answer back with no new value ("Wait, no.")
DECLINED = "declined"  # the key of a reading of an answer that states it has none ("Cannot be determined")


@dataclass(frozen=True)
class Decision:
    """What `decide` claims: `sure`, why, and the reading the grade now follows when a later one replaced the
    rules' value (None: the rules' verdict stands)."""

    sure: bool
    why: str
    follows: Found | None = None


def decide(verdict: Verdict, found: list[Found], key_of_verdict: str | None) -> Decision:
    """Sure or unsure, from the rules' verdict and every reading (module docstring)."""
    if verdict.outcome == "error":
        return Decision(True, "the request or the grader failed: nothing to read")
    later = [f for f in found if f.strength is Strength.LATER and f.value is not None and f.key != WITHDRAWN]
    read = [f for f in found if f.value is not None and f.strength is not Strength.LATER]
    last_at = max((f.at for f in read if f.strength > Strength.FALLBACK), default=-1)
    if any(f.key == WITHDRAWN and f.at > last_at for f in found):
        return Decision(False, "the answer is taken back after it and no new one follows")
    if verdict.outcome == "truncated" and verdict.extracted is None and not read:
        return Decision(True, "cut at max_tokens before any answer")
    if verdict.outcome == "unparsed":
        return _unread(verdict, read, later)
    if later:
        last = max(later, key=lambda f: f.at)
        if last.key != key_of_verdict:
            return Decision(False, f"{last.rule} names {last.value!r} after the answer", follows=last)
    if verdict.ambiguous:
        return Decision(False, "two readings of the rules disagree")
    if not read:
        return Decision(False, "no reader found the value the rules graded")
    top = max(f.strength for f in read)
    strongest = [f for f in read if f.strength == top]
    if top is Strength.FALLBACK:
        return Decision(False, "only a fallback read a value (" + ", ".join(f.rule for f in strongest) + ")")
    keys = {f.key for f in strongest}
    if len(keys) > 1:
        shown = ", ".join(f"{f.rule} {f.value!r}" for f in strongest)
        return Decision(False, f"the strongest readings disagree: {shown}")
    if key_of_verdict not in keys:
        return Decision(False, f"the rules graded {verdict.extracted!r}, the strongest readings read otherwise")
    return Decision(True, f"{len(strongest)} {top.name.lower()} reading(s) agree, nothing after contradicts")


# The rules' names for "nothing read" (as opposed to an answer withdrawn or a quantity with no unit asked).
NOTHING_READ = ("no_number", "no_answer", "not_a_choice", "math_verify_fallback", "no_code")


def _unread(verdict: Verdict, read: list[Found], later: list[Found]) -> Decision:
    """An answer the rules left unread: the readers' value when the strongest non-fallback readings agree on one
    and nothing after contradicts it (the grade follows it, sure); else unsure."""
    if not verdict.rule.endswith(NOTHING_READ) or later:
        return Decision(False, "no answer read")
    strong = [f for f in read if f.strength > Strength.FALLBACK]
    if not strong:
        return Decision(False, "no answer read (a fallback alone is never sure)")
    top = max(f.strength for f in strong)
    strongest = [f for f in strong if f.strength == top]
    if len({f.key for f in strongest}) > 1 or any(f.key and f.key.startswith("hedge:") for f in strongest):
        return Decision(False, "the rules read nothing and the strongest readings disagree")
    if strongest[0].key == DECLINED:  # "Cannot be determined": the answer says it has none, a sure non-answer
        return Decision(True, f"the answer declines to give a value ({strongest[0].value!r})")
    return Decision(True, f"the rules read nothing; {strongest[0].rule} read {strongest[0].value!r}", strongest[0])


def with_decision(
    verdict: Verdict, found: list[Found], key_of_verdict: str | None, rescore: Callable[[Found], Verdict] | None = None
) -> Verdict:
    """The verdict with `sure` and every reading set; a later reading that replaces the value regrades by it
    (`rescore`), keeping the rules' reading beside it."""
    d = decide(verdict, found, key_of_verdict)
    right = verdict.correct if verdict.extracted is not None else None
    rules = Reading(verdict.rule, verdict.extracted, "rules", right)
    every = (rules, *(f.reading() for f in found))  # the rules' own reading first, then every reader's
    if d.follows is not None and rescore is not None:
        new = rescore(d.follows)
        if verdict.outcome == "unparsed":  # the readers read what the rules left unread
            rule = f"{verdict.rule.split('.', 1)[0]}.{d.follows.rule}"
            return replace(new, rule=rule, why=f"{new.why}; {d.why}", every=every, sure=d.sure, sure_why=d.why)
        before = Reading(verdict.rule, verdict.extracted)
        after = Reading(d.follows.rule, d.follows.value)
        return replace(
            new,
            why=f"{new.why}; {d.why} (replacing {verdict.extracted!r} of {verdict.rule})",
            readings=verdict.readings or (before, after),
            every=every,
            sure=False,
            sure_why=d.why,
        )
    return replace(verdict, every=every, sure=d.sure, sure_why=d.why)
