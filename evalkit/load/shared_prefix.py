"""Shared-prefix groups: G groups of users, each group's U users sharing one S-token system prompt, run cold and warm.

Group g's system prompt is seeded filler of S tokens (its first words name the group, so no two groups share a
block); each user asks its own question (`--prompt-tokens` long, ending in a count whose answer is checked). A cold
run first empties the server's prefix cache where the server allows it (evalkit/load/cache_reset.py, recorded
with the run); a warm run follows with the system prompts already cached (a warm run alone first sends one
unmeasured request per group). Users ask new questions in each run, so only the system prompt can be reused.
Whether a cold run really was cold is read from the server's own figures: each group's first user must find less
than half its system prompt cached (`cold_verified`); a reset the server accepted is not proof of it.
`--concurrency` workers take the requests group by group.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from evalkit.client.prompts import GenQuestion
from evalkit.client.tokens import count_tokens
from evalkit.load.conversation import UserTurn
from evalkit.load.metrics import dist
from evalkit.load.records import LoadLine, TurnLabels
from evalkit.load.summary_records import CacheResetJson, SessionRecord, SharedPrefixJson, SharedPrefixRunJson
from evalkit.load.turns import TurnSender, hit_rate
from evalkit.load.workload import Lengths, count_for, filler_text

_PER_MESSAGE = 4


@dataclass(frozen=True)
class SharedPrefixSpec:
    """G groups of U users sharing an S-token system prompt; question and answer lengths; which runs."""

    groups: int
    users: int
    system_tokens: int
    prompt_tokens: Lengths
    output_tokens: Lengths
    runs: tuple[str, ...] = ("cold", "warm")
    concurrency: int = 1
    seed: int = 42
    token_scale: float = 1.0
    max_tokens: int | None = None  # a cap on every answer (default: room for the whole count)


def system_prompt(spec: SharedPrefixSpec, group: int) -> str:
    """Group `group`'s system prompt: S tokens (the server's, through the token scale)."""
    head = f"Group {group} instructions:"
    want = round(spec.system_tokens / spec.token_scale) - _PER_MESSAGE - count_tokens(head)
    return head + (" " + filler_text(random.Random(f"system:{spec.seed}:{group}"), want) if want > 0 else "")


def question(spec: SharedPrefixSpec, run: str, group: int, user: int) -> UserTurn:
    """User `user` of group `group`'s question in run `run` (new in every run)."""
    rng = random.Random(f"shared-prefix:{spec.seed}:{run}:{group}:{user}")
    want = round(spec.prompt_tokens.draw(rng) / spec.token_scale)
    n = count_for(spec.output_tokens.draw(rng), group * spec.users + user)
    q = GenQuestion(n).text
    own = max(0, want - count_tokens(q) - _PER_MESSAGE)
    return UserTurn((filler_text(rng, own) + "\n\n" if own else "") + q, n)


async def run_shared_prefix(
    spec: SharedPrefixSpec, sender: TurnSender, reset: Callable[[], Awaitable[CacheResetJson]]
) -> list[SessionRecord]:
    """Each run of `spec.runs` in order; returns one record per run (the cache reset it did, if any)."""
    systems = [system_prompt(spec, g) for g in range(spec.groups)]
    out = []
    for run in spec.runs:
        record: SessionRecord = {"run": run, "reset": None, "primed": False}
        if run == "cold":
            record["reset"] = await reset()
        elif "cold" not in spec.runs[: spec.runs.index(run)]:
            record["primed"] = True
            for g in range(spec.groups):
                ut = question(spec, "prime", g, 0)
                msgs = [{"role": "system", "content": systems[g]}, {"role": "user", "content": ut.text}]
                prime: TurnLabels = {"workload": "shared_prefix", "run": "prime"}
                await sender.send(msgs, spec.max_tokens or ut.max_tokens, ut.expected, prime)
        jobs = [(g, u) for g in range(spec.groups) for u in range(spec.users)]
        queue: asyncio.Queue[tuple[int, int]] = asyncio.Queue()
        for j in jobs:
            queue.put_nowait(j)

        async def worker(queue: asyncio.Queue[tuple[int, int]], run: str) -> None:
            while not queue.empty():
                g, u = queue.get_nowait()
                ut = question(spec, run, g, u)
                msgs = [{"role": "system", "content": systems[g]}, {"role": "user", "content": ut.text}]
                labels: TurnLabels = {
                    "workload": "shared_prefix",
                    "run": run,
                    "group": g,
                    "user": u,
                    "index": g * spec.users + u,
                }
                await sender.send(msgs, spec.max_tokens or ut.max_tokens, ut.expected, labels)

        await asyncio.gather(*(worker(queue, run) for _ in range(max(1, spec.concurrency))))
        out.append(record)
    return out


def _cold_verified(first: list[int | None], spec: SharedPrefixSpec) -> bool | None:
    """Whether each group's first user found less than half its system prompt cached: a reset that the server
    accepted may still leave a cache standing (llama.cpp's host prompt cache survives a slot erase)."""
    if any(n is None for n in first):
        return None
    return all(n is not None and int(n) < spec.system_tokens / 2 for n in first)


def summarise(lines: list[LoadLine], runs: list[SessionRecord], spec: SharedPrefixSpec) -> SharedPrefixJson:
    """The `shared_prefix` figures: per run (cold, warm) the hit rate the server reported and the latencies."""
    per_run: list[SharedPrefixRunJson] = []
    for rec in runs:
        at = [r for r in lines if r.get("run") == rec["run"] and r.get("group") is not None]
        ok = [r for r in at if r.get("outcome") in ("correct", "wrong")]
        first = [
            next((r.get("cache_n") for r in at if r.get("group") == g and r.get("user") == 0), None)
            for g in range(spec.groups)
        ]
        per_run.append(
            {
                "run": rec["run"],
                "reset": rec["reset"],
                "primed": rec["primed"],
                "first_users_cache_n": first,
                "cold_verified": _cold_verified(first, spec) if rec["run"] == "cold" else None,
                "requests": len(at),
                "errors": sum(r.get("outcome") == "error" for r in at),
                "wrong_answers": sum(r.get("outcome") == "wrong" for r in at),
                "ttft_s": dist(r.get("ttft_s") for r in ok),
                "e2e_s": dist(r.get("e2e_s") for r in ok),
                "prefix_cache": hit_rate(ok),
                "per_group": [hit_rate([r for r in ok if r.get("group") == g]) for g in range(spec.groups)],
            }
        )
    return {
        "groups": spec.groups,
        "users_per_group": spec.users,
        "system_tokens": spec.system_tokens,
        "concurrency": spec.concurrency,
        "runs": per_run,
    }
