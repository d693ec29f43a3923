"""Per-question scores from graded lines: the mean over repeats (0 or 1 without repeats), pass@1 and agreement.

A line's sample key is its id and `repeat` (0 when absent); a resumed run re-asks errored samples, so the last
line of each key counts. pass@1 is the mean over questions of each question's mean score across repeats.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from evalkit.runs.schemas import GradedLine


@dataclass(frozen=True)
class QuestionScore:
    """One question's samples: outcomes and extracted answers in repeat order, the mean score, and whether each
    sample's grade is sure (issue #55; a line written before `sure` existed counts as sure)."""

    qid: str
    dataset: str
    outcomes: tuple[str, ...]
    extracted: tuple[Any, ...]
    whys: tuple[str, ...] = ()
    sure: tuple[bool, ...] = ()

    @property
    def unsure(self) -> bool:
        """True when any sample's grade is unsure: the question's score can't be told."""
        return not all(self.sure)

    @property
    def n(self) -> int:
        """Samples graded."""
        return len(self.outcomes)

    @property
    def score(self) -> float:
        """Share of samples graded correct."""
        return sum(o == "correct" for o in self.outcomes) / self.n if self.n else 0.0

    @property
    def agrees(self) -> bool:
        """True when every repeat got the same verdict (all right or all not)."""
        return len({o == "correct" for o in self.outcomes}) <= 1


@dataclass(frozen=True)
class PassAt1:
    """pass@1 over questions with a 95% interval (normal approximation over per-question means)."""

    value: float
    low: float
    high: float
    questions: int
    repeats: int
    agreement: float


@dataclass(frozen=True)
class PairedChanges:
    """Two runs' answers to the questions both answered: how many scored lower in the second (lost), how many
    higher (gained); with repeats, a question's score is its mean over them. A question whose grade is unsure on
    either side is `cant_tell` (issue #55): never a loss or a gain."""

    paired: int
    lost: int
    gained: int
    cant_tell: int = 0


def paired_changes(a: dict[str, QuestionScore], b: dict[str, QuestionScore]) -> PairedChanges:
    """What run `b` lost and gained against run `a`, question by question (McNemar's discordant pairs); questions
    unsure on either side are counted apart as can't tell."""
    common = [q for q in a if q in b]
    told = [q for q in common if not (a[q].unsure or b[q].unsure)]
    lost = sum(1 for q in told if b[q].score < a[q].score)
    gained = sum(1 for q in told if b[q].score > a[q].score)
    return PairedChanges(len(common), lost, gained, len(common) - len(told))


# A graded line as a record, or as written (a JSON object of graded.jsonl, as `RunDir.read` gives it).
Graded = TypeVar("Graded", GradedLine, dict[str, Any])


def sample_key(line: Graded) -> tuple[str, int]:
    """A graded line's sample: its question id and repeat (0 when absent)."""
    if isinstance(line, GradedLine):
        return line.id, line.repeat or 0
    return str(line["id"]), int(line.get("repeat") or 0)


def latest_per_sample(lines: Sequence[Graded]) -> list[Graded]:
    """The last line of each (id, repeat), in first-seen order."""
    out: dict[tuple[str, int], Graded] = {}
    for line in lines:
        out[sample_key(line)] = line
    return list(out.values())


def as_record(line: Graded) -> GradedLine:
    """A graded line as its record (one held as a dict, as written, validated)."""
    if isinstance(line, GradedLine):
        return line
    return GradedLine.model_validate(line)


def graded_lines(lines: Sequence[Graded]) -> list[GradedLine]:
    """Graded lines as records (those held as dicts, as written, validated)."""
    return [as_record(x) for x in lines]


def question_scores(lines: Sequence[GradedLine]) -> dict[str, QuestionScore]:
    """Each question's samples from a run's graded lines, in first-seen order of ids."""
    grouped: dict[str, list[GradedLine]] = {}
    for line in sorted(latest_per_sample(lines), key=lambda ln: ln.repeat or 0):
        grouped.setdefault(line.id, []).append(line)
    order = list(dict.fromkeys(ln.id for ln in lines))
    return {
        q: QuestionScore(
            q,
            str(grouped[q][0].dataset or q.split(":", 1)[0]),
            tuple(str(ln.outcome or ("correct" if ln.correct else "wrong")) for ln in grouped[q]),
            tuple(ln.extracted for ln in grouped[q]),
            tuple(str(ln.why or "") for ln in grouped[q]),
            tuple(ln.sure is not False for ln in grouped[q]),
        )
        for q in order
    }


def pass_at_1(scores: list[QuestionScore]) -> PassAt1 | None:
    """Mean of per-question means, its 95% interval, and the share of questions whose repeats all agree."""
    if not scores:
        return None
    means = [s.score for s in scores]
    value = statistics.fmean(means)
    half = 1.96 * statistics.stdev(means) / math.sqrt(len(means)) if len(means) > 1 else 0.0
    return PassAt1(
        value,
        max(0.0, value - half),
        min(1.0, value + half),
        len(scores),
        max(s.n for s in scores),
        sum(s.agrees for s in scores) / len(scores),
    )
