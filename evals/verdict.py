"""The outcome of grading one answer: what was read, whether it is right, which rule read it, and why."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict


class ReadingJson(TypedDict, total=False):
    """A `readings` entry of a `graded.jsonl` line (`Reading.to_json`): `strength` and `correct` only where every
    reader's reading is kept."""

    rule: str
    value: str | None
    strength: str
    correct: bool | None


class VerdictDetails(TypedDict, total=False):
    """A verdict's grader extras: HumanEval+'s base and plus test results and the sandbox that ran them."""

    base: str
    plus: str
    isolation: str


class VerdictJson(TypedDict):
    """A verdict's fields as JSON (`Verdict.to_json`), in its field order, then `correct` and `ambiguous`."""

    outcome: str
    extracted: str | None
    why: str
    details: VerdictDetails
    rule: str
    readings: list[ReadingJson]
    every: list[ReadingJson]
    sure: bool | None
    sure_why: str
    correct: bool
    ambiguous: bool


@dataclass(frozen=True)
class Reading:
    """One way of reading an answer: the rule that fired and what it read (`value` as text, None for nothing); where
    every reader's reading is kept (`Verdict.every`), also its `strength` (`sureness.Strength`, lower case) and
    whether its value is right against the gold (`correct`, None when nothing was read)."""

    rule: str
    value: str | None
    strength: str | None = None
    correct: bool | None = None

    def to_json(self) -> ReadingJson:
        """The reading as a `readings` entry of a `graded.jsonl` line."""
        out: ReadingJson = {"rule": self.rule, "value": self.value}
        if self.strength is not None:
            out["strength"] = self.strength
            out["correct"] = self.correct
        return out


@dataclass(frozen=True)
class Verdict:
    """One graded answer. `outcome` is one of `evalkit.runs.schemas.OUTCOMES`; `rule` names the extraction rule that
    fired (a stable `<dataset>.<rule>` name); `readings` holds two or more readings that disagree (then the grade is
    ambiguous); `details` holds grader extras (base/plus results ...). `every` is every reader's reading and `sure`
    whether the grade is sure (`sureness.decide`; None until decided), `sure_why` why."""

    outcome: str
    extracted: str | None
    why: str
    details: VerdictDetails = field(default_factory=VerdictDetails)
    rule: str = ""
    readings: tuple[Reading, ...] = ()
    every: tuple[Reading, ...] = ()
    sure: bool | None = None
    sure_why: str = ""

    @property
    def correct(self) -> bool:
        """True only for the `correct` outcome."""
        return self.outcome == "correct"

    @property
    def ambiguous(self) -> bool:
        """True when two readings of the answer disagree."""
        return len({r.value for r in self.readings}) > 1

    def to_json(self) -> VerdictJson:
        """The verdict's fields for a `graded.jsonl` line."""
        return {
            "outcome": self.outcome,
            "extracted": self.extracted,
            "why": self.why,
            "details": VerdictDetails(**self.details),  # a copy, as `dataclasses.asdict` made
            "rule": self.rule,
            "readings": [r.to_json() for r in self.readings],
            "every": [r.to_json() for r in self.every],
            "sure": self.sure,
            "sure_why": self.sure_why,
            "correct": self.correct,
            "ambiguous": self.ambiguous,
        }


def disagreeing(readings: list[Reading]) -> tuple[Reading, ...]:
    """The readings, kept only when at least two of them read different values (nothing to record otherwise)."""
    return tuple(readings) if len({r.value for r in readings}) > 1 else ()
