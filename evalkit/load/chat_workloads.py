"""`evalkit load --conversations USERS` and `--shared-prefix GROUPS` as a measurement of a run session: chats of
several messages sent as users make them, written to `sessions.jsonl` and summarized with their own `conversation`
or `shared_prefix` figures beside the load summary's totals."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalkit.evidence.capture import evidence_summary
from evalkit.load import conversation, shared_prefix
from evalkit.load.cache_reset import reset_prefix_cache
from evalkit.load.measure import LoadMeasurement, run_token_scale
from evalkit.load.session_summary import SESSIONS, session_summary
from evalkit.load.turns import TurnSender
from evalkit.load.workload import Lengths
from evalkit.progress import Progress
from evalkit.session.context import RunContext


@dataclass(frozen=True)
class ChatWorkload:
    """`kind` conversation (`users` x `turns`, `think_s` apart) or shared_prefix (`groups` of `users_per_group`
    with `system_tokens`-token system prompts, `cache_runs` cold / warm / both, `concurrency` at once). Lengths are
    the flags' texts, parsed when the run starts."""

    kind: str  # conversation | shared_prefix
    seed: int
    prompt_tokens: str
    output_tokens: str
    max_tokens: int | None = None  # a cap on every answer (default: room for the whole count)
    users: int = 0
    turns: int = 0
    think_s: float = 0.0
    groups: int = 0
    users_per_group: int = 0
    system_tokens: int = 0
    cache_runs: str = "both"
    concurrency: int = 1
    token_scale: float | None = None  # None: measured against the server first
    timeout_s: float = 300.0


def chat_measurement(workload: ChatWorkload, options: dict[str, Any]) -> LoadMeasurement:
    """The session's measurement of `workload`; `options` are what the manifest records of it (`load`)."""

    async def run(ctx: RunContext) -> dict[str, Any]:
        return await measure_chats(workload, ctx)

    return LoadMeasurement(workload.seed, options, run, errors_fail=True)


async def measure_chats(w: ChatWorkload, ctx: RunContext) -> dict[str, Any]:
    """Send the conversations or shared-prefix groups and summarize them."""
    scale = await run_token_scale(ctx, w.token_scale)
    sender = TurnSender(ctx.rundir, ctx.client, w.timeout_s)
    prompt, output = (
        Lengths.parse(w.prompt_tokens, "--prompt-tokens"),
        Lengths.parse(w.output_tokens, "--output-tokens"),
    )
    if w.kind == "conversation":
        total = w.users * w.turns
    else:
        runs_n = 2 if w.cache_runs == "both" else 1
        total = w.groups * w.users_per_group * runs_n + (w.groups if w.cache_runs == "warm" else 0)
    sender.progress = progress = Progress(total, f"load {w.kind}", "requests")
    try:
        if w.kind == "conversation":
            cspec = conversation.ConversationSpec(
                w.users, w.turns, w.think_s, prompt, output, w.seed, scale, w.max_tokens
            )
            records = await conversation.run_conversations(cspec, sender, ctx.clock)
        else:
            runs = ("cold", "warm") if w.cache_runs == "both" else (w.cache_runs,)
            sspec = shared_prefix.SharedPrefixSpec(
                w.groups,
                w.users_per_group,
                w.system_tokens,
                prompt,
                output,
                runs,
                w.concurrency,
                w.seed,
                scale,
                w.max_tokens,
            )
            key = ctx.profile.api_key
            records = await shared_prefix.run_shared_prefix(
                sspec, sender, lambda: reset_prefix_cache(ctx.client.base_url, key)
            )
        await sender.flush()
    finally:
        progress.close()
        sender.close()
    for rec in records:
        ctx.rundir.append(SESSIONS, rec)
    await ctx.evidence.snapshot(w.kind)
    await ctx.evidence.end()
    return {**session_summary(ctx.rundir.path), **evidence_summary(ctx.rundir.path)}
