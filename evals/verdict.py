"""The outcome of grading one answer: what was read, whether it is right, which rule read it, and why."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Reading:
    """One way of reading an answer: the rule that fired and what it read (`value` as text, None for nothing); where
    every reader's reading is kept (`Verdict.every`), also its `strength` (`sureness.Strength`, lower case) and
    whether its value is right against the gold (`correct`, None when nothing was read)."""

    rule: str
    value: str | None
    strength: str | None = None
    correct: bool | None = None

    def to_json(self) -> dict[str, Any]:
        """The reading as a `readings` entry of a `graded.jsonl` line."""
        out: dict[str, Any] = {"rule": self.rule, "value": self.value}
        if self.strength is not None:
            out.update(strength=self.strength, correct=self.correct)
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
    details: dict[str, Any] = field(default_factory=dict)
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

    def to_json(self) -> dict[str, Any]:
        """The verdict's fields for a `graded.jsonl` line."""
        d = asdict(self)
        d["correct"] = self.correct
        d["ambiguous"] = self.ambiguous
        d["readings"] = [r.to_json() for r in self.readings]
        d["every"] = [r.to_json() for r in self.every]
        return d


def disagreeing(readings: list[Reading]) -> tuple[Reading, ...]:
    """The readings, kept only when at least two of them read different values (nothing to record otherwise)."""
    return tuple(readings) if len({r.value for r in readings}) > 1 else ()
