"""The six scenarios of a stress cycle, each a small list of planned requests with seeded delays and questions.

Delays are real seconds as a real server would see them; the runner divides them by `--time-scale`.
Requests in flight together never share an answer, so a response delivered to the wrong request is caught.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable

from evalkit_stress.prompts import GenQuestion, LongSpec, ShortQuestion

# The write-up's order. "concurrent_gen" right after "cancel_then_short" is deliberate: it is how a cancel that
# does not abort the prefill was caught (the zombie prefill slows the two generations).
SCENARIOS = (
    "long_alone",
    "short_insert",
    "double_insert",
    "cancel_then_short",
    "concurrent_gen",
    "short_baseline",
)
INSERT_DELAY_S = (0.5, 3.0)
CANCEL_DELAY_S = (1.0, 4.0)
BASELINE_SHORTS = 2


@dataclass(frozen=True)
class PlannedRequest:
    """One request of the schedule: what to ask, when (seconds after its scenario starts) and what to expect."""

    plan_id: str
    cycle: int
    scenario: str
    role: str  # long | short | gen_pair | gen_solo
    offset_s: float  # planned send time after the scenario's start (real seconds, before --time-scale)
    question: ShortQuestion | GenQuestion | LongSpec
    cancel_after_s: float | None = None  # close the stream this long after sending (planned cancel)
    after: tuple[str, ...] = ()  # send only once these plan_ids have returned (offset_s then counts from that)

    @property
    def expected(self) -> str:
        """The answer, as text."""
        q = self.question
        if isinstance(q, LongSpec):
            return q.code
        return str(q.answer)

    @property
    def checked(self) -> bool:
        """False for the request cancelled on purpose: it has no answer to check."""
        return self.cancel_after_s is None


@dataclass(frozen=True)
class Scenario:
    """One scenario instance in one cycle."""

    cycle: int
    name: str
    requests: tuple[PlannedRequest, ...]


class QuestionSource:
    """Seeded questions; remembers the answers of the current scenario so concurrent requests never share one."""

    def __init__(self, rng: random.Random, gen_tokens: int = 512) -> None:
        self.rng = rng
        # Counting to n costs up to ~4 tokens a number on digit-by-digit tokenizers (Qwen): keep it inside gen_tokens.
        self.gen_max = max(3, min(100, gen_tokens // 4))
        self._taken: set[str] = set()

    def new_scenario(self) -> None:
        """Forget the previous scenario's answers."""
        self._taken = set()

    def short(self) -> ShortQuestion:
        """A seeded arithmetic question with an answer no other request of this scenario has."""
        while True:
            op = self.rng.choice("+-*")
            if op == "*":
                q = ShortQuestion(self.rng.randint(12, 99), op, self.rng.randint(12, 99))
            else:
                q = ShortQuestion(self.rng.randint(100, 999), op, self.rng.randint(10, 99))
            if str(q.answer) not in self._taken:
                self._taken.add(str(q.answer))
                return q

    def gen(self) -> GenQuestion:
        """A seeded count whose answer fits in the generation's tokens on common tokenizers."""
        while True:
            q = GenQuestion(self.rng.randint(max(2, self.gen_max // 3), self.gen_max))
            if q.answer not in self._taken:
                self._taken.add(q.answer)
                return q


def build_scenario(
    name: str,
    cycle: int,
    rng: random.Random,
    questions: QuestionSource,
    next_long: Callable[[], LongSpec],
) -> Scenario:
    """The planned requests of scenario `name` in `cycle`, every delay and question drawn from `rng`."""
    questions.new_scenario()
    pid = f"c{cycle}-{name}"
    reqs: list[PlannedRequest]
    if name == "long_alone":
        reqs = [PlannedRequest(f"{pid}-long", cycle, name, "long", 0.0, next_long())]
    elif name == "short_insert":
        d = round(rng.uniform(*INSERT_DELAY_S), 3)
        reqs = [
            PlannedRequest(f"{pid}-long", cycle, name, "long", 0.0, next_long()),
            PlannedRequest(f"{pid}-short", cycle, name, "short", d, questions.short()),
        ]
    elif name == "double_insert":
        d = round(rng.uniform(*INSERT_DELAY_S), 3)
        reqs = [
            PlannedRequest(f"{pid}-long", cycle, name, "long", 0.0, next_long()),
            PlannedRequest(f"{pid}-short1", cycle, name, "short", d, questions.short()),
            PlannedRequest(f"{pid}-short2", cycle, name, "short", d, questions.short()),
        ]
    elif name == "cancel_then_short":
        c = round(rng.uniform(*CANCEL_DELAY_S), 3)
        reqs = [
            PlannedRequest(f"{pid}-long", cycle, name, "long", 0.0, next_long(), cancel_after_s=c),
            PlannedRequest(f"{pid}-short", cycle, name, "short", 0.0, questions.short(), after=(f"{pid}-long",)),
        ]
    elif name == "concurrent_gen":
        a, b = questions.gen(), questions.gen()
        # The pair first (right after the cancel, as in the write-up), then each prompt alone as the reference
        # for `divergent` and for the single-stream rate that `effective_concurrency` compares against.
        reqs = [
            PlannedRequest(f"{pid}-pair1", cycle, name, "gen_pair", 0.0, a),
            PlannedRequest(f"{pid}-pair2", cycle, name, "gen_pair", 0.0, b),
            PlannedRequest(f"{pid}-solo1", cycle, name, "gen_solo", 0.0, a, after=(f"{pid}-pair1", f"{pid}-pair2")),
            PlannedRequest(f"{pid}-solo2", cycle, name, "gen_solo", 0.0, b, after=(f"{pid}-solo1",)),
        ]
    elif name == "short_baseline":
        reqs = []
        prev: tuple[str, ...] = ()
        for i in range(1, BASELINE_SHORTS + 1):
            reqs.append(PlannedRequest(f"{pid}-short{i}", cycle, name, "short", 0.0, questions.short(), after=prev))
            prev = (f"{pid}-short{i}",)
    else:
        raise ValueError(f"unknown scenario {name!r}")
    return Scenario(cycle=cycle, name=name, requests=tuple(reqs))
