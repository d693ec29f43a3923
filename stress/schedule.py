"""The whole seeded schedule of a stress run, and its text form (what `--dry-run` prints).

The seed fixes every prompt, delay and choice: each cycle draws from its own `Random(f"...:{seed}:{cycle}")`,
so the text below is byte-identical for the same flags.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from evalkit.client.prompts import GenQuestion, LongSpec, filler_words, random_code
from evalkit_stress.scenario_file import ScenarioFile, builtin_scenarios
from evalkit_stress.scenarios import PlannedRequest, QuestionSource, Scenario, TextQuestion, build_scenario


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
    source: ScenarioFile | None = None  # the scenario file; None only for hand-built schedules

    def requests(self) -> list[PlannedRequest]:
        """All planned requests in run order."""
        return [r for s in self.scenarios for r in s.requests]

    def long_specs(self) -> list[LongSpec]:
        """Every long prompt's spec, in run order (repeats when `--reuse-long-prompt`)."""
        return [r.question for r in self.requests() if isinstance(r.question, LongSpec)]

    def cycle(self, n: int) -> list[Scenario]:
        """The scenarios of cycle `n` (1-based)."""
        return [s for s in self.scenarios if s.cycle == n]

    def long_target(self, r: PlannedRequest) -> int:
        """The server-token length a long request's prompt is fitted to."""
        return r.long_tokens or self.long_tokens

    @property
    def concurrent(self) -> bool:
        """Whether a cycle's scenarios run at the same time (the file's `run = "concurrent"`)."""
        return self.source is not None and self.source.run == "concurrent"


class _LongSpecs:
    """Hands out long prompt specs; each starts with a different vocabulary word, so first tokens differ."""

    def __init__(self, seed: int, reuse: bool, salt: str = "") -> None:
        self.salt = salt
        self.rng = random.Random(f"evalkit-stress:long:{seed}")
        self.words = list(filler_words())
        self.rng.shuffle(self.words)
        self.reuse = reuse
        self.count = 0
        self._first: dict[int | None, LongSpec] = {}

    def __call__(self, tokens: int | None = None) -> LongSpec:
        # With --reuse-long-prompt, one prompt per length: a prompt fitted to one length cannot be sent at another.
        if self.reuse and tokens in self._first:
            return self._first[tokens]
        i = self.count
        self.count += 1
        # Past the vocabulary (over ~100 cycles) a numbered word keeps the first token unique.
        word = self.words[i] if i < len(self.words) else f"{self.words[i % len(self.words)]}{i}"
        spec = LongSpec(
            first_word=word,
            filler_seed=self.rng.getrandbits(32),
            code=random_code(self.rng),
            code_at=round(self.rng.uniform(0.1, 0.9), 3),
            salt=self.salt,
        )
        self._first.setdefault(tokens, spec)
        return spec


def build_schedule(
    seed: int,
    cycles: int,
    long_tokens: int,
    shuffle: bool = False,
    reuse_long_prompt: bool = False,
    gen_tokens: int = 512,
    scenarios: ScenarioFile | None = None,
    salt: str = "",
) -> Schedule:
    """The full schedule for `cycles` cycles of seed `seed`, from `scenarios` (default: the write-up's cycle); `salt`
    goes first in every long prompt (the seed fixes everything else)."""
    source = scenarios or builtin_scenarios()
    specs = {s.name: s for s in source.scenarios}
    longs = _LongSpecs(seed, reuse_long_prompt, salt)
    out: list[Scenario] = []
    for cycle in range(1, cycles + 1):
        rng = random.Random(f"evalkit-stress:{seed}:{cycle}")
        order = list(source.names)
        if shuffle:
            rng.shuffle(order)
        questions = QuestionSource(rng, gen_tokens)
        for name in order:
            spec = specs[name]
            out.extend(build_scenario(spec, cycle, rng, questions, longs, k) for k in range(1, spec.rounds + 1))
    return Schedule(seed, cycles, long_tokens, shuffle, reuse_long_prompt, gen_tokens, tuple(out), source)


def _names(plan_ids: tuple[str, ...]) -> str:
    return ",".join(a.rsplit("-", 1)[-1] for a in plan_ids)


def describe_request(r: PlannedRequest, time_scale: float = 1.0) -> str:
    """One line of the dry run for a planned request."""
    q = r.question
    when = f"+{r.offset_s / time_scale:.3f}s"
    if r.after:
        # "after X" alone means after X is done: the built-in cycle's wording, kept byte for byte.
        event = "" if r.after_on == "done" else f".{r.after_on}"
        when = f"after {_names(r.after)}{event} {when}"
    if isinstance(q, LongSpec):
        what = f"long first={q.first_word} filler={q.filler_seed} code={q.code} at={q.code_at:.3f}"
        if r.long_tokens is not None:
            what += f" tokens={r.long_tokens}"
    elif isinstance(q, GenQuestion):
        what = f"{q.text!r} -> 1..{q.n}"
    elif isinstance(q, TextQuestion):
        what = f"{q.text!r} -> " + (repr(q.answer) if q.answer else "(not checked)")
    else:
        what = f"{q.text!r} -> {r.expected}"
    if r.max_tokens is not None:
        what += f" max_tokens={r.max_tokens}"
    cancel = ""
    if r.cancel_after_s is not None:
        ref = (
            f"{_names(r.cancel_refs)}.{r.cancel_on}+"
            if r.cancel_refs
            else ("first_token+" if r.cancel_on == "first_token" else "")
        )
        cancel = f" cancel@{ref}{r.cancel_after_s / time_scale:.3f}s"
    return f"  {r.plan_id:<32} {r.role:<8} {when:<24}{cancel} {what}"


def render_schedule(s: Schedule, time_scale: float = 1.0) -> str:
    """The dry run's text: a header, then every scenario and its requests."""
    lines = [
        f"evalkit stress schedule: seed={s.seed} cycles={s.cycles} long_tokens={s.long_tokens} "
        f"shuffle={'on' if s.shuffle else 'off'} reuse_long_prompt={'on' if s.reuse_long_prompt else 'off'} "
        f"gen_tokens={s.gen_tokens} time_scale={time_scale:g} requests={len(s.requests())}"
        + (f" scenarios={s.source.label} run={s.source.run}" if s.source and not s.source.builtin else ""),
    ]
    for sc in s.scenarios:
        lines.append(f"cycle {sc.cycle} {sc.name}" + (f" round {sc.round_no}/{sc.rounds}" if sc.rounds > 1 else ""))
        lines.extend(describe_request(r, time_scale) for r in sc.requests)
    return "\n".join(lines) + "\n"
