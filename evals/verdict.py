"""The outcome of grading one answer: what was read, whether it is right, and why."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

OUTCOMES = ("correct", "wrong", "unparsed", "truncated", "error")


@dataclass(frozen=True)
class Verdict:
    """One graded answer. `outcome` is one of OUTCOMES; `details` holds grader extras (base/plus results ...)."""

    outcome: str
    extracted: str | None
    why: str
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def correct(self) -> bool:
        """True only for the `correct` outcome."""
        return self.outcome == "correct"

    def to_json(self) -> dict[str, Any]:
        """The verdict's fields for a `graded.jsonl` line."""
        d = asdict(self)
        d["correct"] = self.correct
        return d
