"""The whole seeded schedule of a stress run, and its text form (what `--dry-run` prints).

The seed fixes every prompt, delay and choice: each cycle draws from its own `Random(f"...:{seed}:{cycle}")`,
so the text below is byte-identical for the same flags.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from evalkit_stress.prompts import GenQuestion, LongSpec, filler_words, random_code
from evalkit_stress.scenarios import SCENARIOS, PlannedRequest, QuestionSource, Scenario, build_scenario


@dataclass(frozen=True)
class Schedule:
    """Every scenario of every cycle, in the order they run."""

    seed: int
    cycles: int
    long_tokens: int
    shuffle: bool
    reuse_long_prompt: bool
    gen_tokens: int
    scenarios: tuple[Scenario, ...]

    def requests(self) -> list[PlannedRequest]:
        """All planned requests in run order."""
        return [r for s in self.scenarios for r in s.requests]

    def long_specs(self) -> list[LongSpec]:
        """Every long prompt's spec, in run order (repeats when `--reuse-long-prompt`)."""
        return [r.question for r in self.requests() if isinstance(r.question, LongSpec)]

    def cycle(self, n: int) -> list[Scenario]:
        """The scenarios of cycle `n` (1-based)."""
        return [s for s in self.scenarios if s.cycle == n]


class _LongSpecs:
    """Hands out long prompt specs; each starts with a different vocabulary word, so first tokens differ."""

    def __init__(self, seed: int, reuse: bool) -> None:
        self.rng = random.Random(f"evalkit-stress:long:{seed}")
        self.words = list(filler_words())
        self.rng.shuffle(self.words)
        self.reuse = reuse
        self.count = 0
        self._first: LongSpec | None = None

    def __call__(self) -> LongSpec:
        if self.reuse and self._first is not None:
            return self._first
        i = self.count
        self.count += 1
        # Past the vocabulary (over ~100 cycles) a numbered word keeps the first token unique.
        word = self.words[i] if i < len(self.words) else f"{self.words[i % len(self.words)]}{i}"
        spec = LongSpec(
            first_word=word,
            filler_seed=self.rng.getrandbits(32),
            code=random_code(self.rng),
            code_at=round(self.rng.uniform(0.1, 0.9), 3),
        )
        self._first = self._first or spec
        return spec


def build_schedule(
    seed: int, cycles: int, long_tokens: int, shuffle: bool = False, reuse_long_prompt: bool = False,
    gen_tokens: int = 512,
) -> Schedule:
    """The full schedule for `cycles` cycles of seed `seed`."""
    longs = _LongSpecs(seed, reuse_long_prompt)
    out: list[Scenario] = []
    for cycle in range(1, cycles + 1):
        rng = random.Random(f"evalkit-stress:{seed}:{cycle}")
        order = list(SCENARIOS)
        if shuffle:
            rng.shuffle(order)
        questions = QuestionSource(rng, gen_tokens)
        out.extend(build_scenario(name, cycle, rng, questions, longs) for name in order)
    return Schedule(seed, cycles, long_tokens, shuffle, reuse_long_prompt, gen_tokens, tuple(out))


def describe_request(r: PlannedRequest, time_scale: float = 1.0) -> str:
    """One line of the dry run for a planned request."""
    q = r.question
    when = f"+{r.offset_s / time_scale:.3f}s"
    if r.after:
        when = f"after {','.join(a.rsplit('-', 1)[-1] for a in r.after)} {when}"
    if isinstance(q, LongSpec):
        what = f"long first={q.first_word} filler={q.filler_seed} code={q.code} at={q.code_at:.3f}"
    elif isinstance(q, GenQuestion):
        what = f"{q.text!r} -> 1..{q.n}"
    else:
        what = f"{q.text!r} -> {r.expected}"
    cancel = f" cancel@{r.cancel_after_s / time_scale:.3f}s" if r.cancel_after_s is not None else ""
    return f"  {r.plan_id:<32} {r.role:<8} {when:<24}{cancel} {what}"


def render_schedule(s: Schedule, time_scale: float = 1.0) -> str:
    """The dry run's text: a header, then every scenario and its requests."""
    lines = [
        f"evalkit stress schedule: seed={s.seed} cycles={s.cycles} long_tokens={s.long_tokens} "
        f"shuffle={'on' if s.shuffle else 'off'} reuse_long_prompt={'on' if s.reuse_long_prompt else 'off'} "
        f"gen_tokens={s.gen_tokens} time_scale={time_scale:g} requests={len(s.requests())}",
    ]
    for sc in s.scenarios:
        lines.append(f"cycle {sc.cycle} {sc.name}")
        lines.extend(describe_request(r, time_scale) for r in sc.requests)
    return "\n".join(lines) + "\n"
