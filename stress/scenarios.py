"""Scenarios as planned requests: each request of a scenario file's scenario with its seeded delays and question.

Delays are real seconds as a real server would see them; the runner divides them by `--time-scale`.
Requests in flight together never share an answer, so a response delivered to the wrong request is caught.
The write-up's cycle is the built-in file `prompts/stress/default-cycle.toml` (stress/scenario_file.py).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from evalkit.client.prompts import GenQuestion, LongSpec, ShortQuestion
from evalkit_stress.scenario_file import RequestSpec, ScenarioSpec, Span

# The built-in file's scenarios, in the write-up's order (tests/test_scenario_file.py checks the file agrees).
SCENARIOS = (
    "long_alone",
    "short_insert",
    "double_insert",
    "cancel_then_short",
    "concurrent_gen",
    "short_baseline",
)


@dataclass(frozen=True)
class TextQuestion:
    """The user's own prompt and, optionally, the text its answer must contain."""

    text: str
    answer: str | None = None


Question = ShortQuestion | GenQuestion | LongSpec | TextQuestion


@dataclass(frozen=True)
class PlannedRequest:
    """One request of the schedule: what to ask, when (seconds after its scenario starts) and what to expect."""

    plan_id: str
    cycle: int
    scenario: str
    role: str  # the file's role (the built-in cycle: long | short | gen_pair | gen_solo)
    offset_s: float  # planned send time after the scenario's start (real seconds, before --time-scale)
    question: Question
    cancel_after_s: float | None = None  # close the stream this long after sending (planned cancel)
    after: tuple[str, ...] = ()  # send only once these plan_ids reach `after_on` (offset_s then counts from that)
    after_on: str = "done"  # sent | first_token | done
    cancel_refs: tuple[str, ...] = ()  # cancel relative to these plan_ids' `cancel_on` event instead of own send
    cancel_on: str = "sent"
    max_tokens: int | None = None  # None: the --*-max-tokens flag of the prompt kind
    long_tokens: int | None = None  # a long prompt's length; None: --long-tokens
    round_no: int = 1

    @property
    def prompt(self) -> str:
        """The prompt kind: long, short, count or text."""
        q = self.question
        return (
            "long"
            if isinstance(q, LongSpec)
            else "count"
            if isinstance(q, GenQuestion)
            else "text"
            if isinstance(q, TextQuestion)
            else "short"
        )

    @property
    def expected(self) -> str:
        """The answer, as text ("" when a text prompt has none to check)."""
        q = self.question
        if isinstance(q, LongSpec):
            return q.code
        if isinstance(q, TextQuestion):
            return q.answer or ""
        return str(q.answer)

    @property
    def checked(self) -> bool:
        """False for the request cancelled on purpose: it has no answer to check."""
        return self.cancel_after_s is None


@dataclass(frozen=True)
class Scenario:
    """One round of one scenario in one cycle."""

    cycle: int
    name: str
    requests: tuple[PlannedRequest, ...]
    round_no: int = 1
    rounds: int = 1


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

    def gen(self, max_tokens: int | None = None) -> GenQuestion:
        """A seeded count whose answer fits in the generation's tokens (`max_tokens`, else --gen-tokens)."""
        top = self.gen_max if max_tokens is None else max(3, min(100, max_tokens // 4))
        lo = max(2, top // 3)
        if all(GenQuestion(n).answer in self._taken for n in range(lo, top + 1)):
            return GenQuestion(self.rng.randint(lo, top))  # more counts than distinct answers: one must repeat
        while True:
            q = GenQuestion(self.rng.randint(lo, top))
            if q.answer not in self._taken:
                self._taken.add(q.answer)
                return q


def build_scenario(
    spec: ScenarioSpec,
    cycle: int,
    rng: random.Random,
    questions: QuestionSource,
    next_long: Callable[[int | None], LongSpec],
    round_no: int = 1,
) -> Scenario:
    """The planned requests of one round of `spec` in `cycle`; every draw comes from `rng`, in request order."""
    questions.new_scenario()
    pid = f"c{cycle}-{spec.name}" + (f"-r{round_no}" if spec.rounds > 1 else "")
    ids = {r.id: _copy_ids(r) for r in spec.requests}
    asked: dict[str, list[Question]] = {}
    reqs: list[PlannedRequest] = []
    for r in spec.requests:
        send = _draw(r.send.offset, rng)
        cancel = _draw(r.cancel.offset, rng) if r.cancel is not None else None
        tokens = (
            None
            if r.tokens is None
            else (int(r.tokens.lo) if r.tokens.fixed else rng.randint(int(r.tokens.lo), int(r.tokens.hi)))
        )
        mine: list[Question] = []
        for k, copy_id in enumerate(ids[r.id]):
            if r.same_as is not None:
                src = asked[r.same_as]
                q = src[k % len(src)]
            else:
                q = _question(r, questions, next_long, tokens)
            mine.append(q)
            cancel_refs: tuple[str, ...] = ()
            if r.cancel is not None and r.cancel.after and r.cancel.after != (r.id,):
                cancel_refs = tuple(f"{pid}-{c}" for a in r.cancel.after for c in ids[a])
            reqs.append(
                PlannedRequest(
                    plan_id=f"{pid}-{copy_id}",
                    cycle=cycle,
                    scenario=spec.name,
                    role=r.role,
                    offset_s=send,
                    question=q,
                    cancel_after_s=cancel,
                    after=tuple(f"{pid}-{c}" for a in r.send.after for c in ids[a]),
                    after_on=r.send.on,
                    cancel_refs=cancel_refs,
                    cancel_on=r.cancel.on if r.cancel is not None else "sent",
                    max_tokens=r.max_tokens,
                    long_tokens=tokens,
                    round_no=round_no,
                )
            )
        asked[r.id] = mine
    return Scenario(cycle=cycle, name=spec.name, requests=tuple(reqs), round_no=round_no, rounds=spec.rounds)


def _copy_ids(r: RequestSpec) -> list[str]:
    # `repeat = 2` on request "short" sends short1 and short2 together (the write-up's double insert).
    return [r.id] if r.repeat == 1 else [f"{r.id}{k}" for k in range(1, r.repeat + 1)]


def _draw(span: Span, rng: random.Random) -> float:
    # A fixed value draws nothing, so adding a fixed time to a request never shifts the seed's other draws.
    return span.lo if span.fixed else round(rng.uniform(span.lo, span.hi), 3)


def _question(
    r: RequestSpec, questions: QuestionSource, next_long: Callable[[int | None], LongSpec], tokens: int | None
) -> Question:
    if r.prompt == "long":
        return next_long(tokens)
    if r.prompt == "short":
        return questions.short()
    if r.prompt == "count":
        return questions.gen(r.max_tokens)
    assert r.text is not None
    return TextQuestion(r.text, r.answer)
