"""`evalkit load --conversations USERS` and `--shared-prefix GROUPS`: chats of several messages sent as users make
them, written to `sessions.jsonl` and summarized with their own `conversation` or `shared_prefix` figures beside the
load summary's totals. Each is its own plan and sender (`evalkit.load.measure.WorkloadPlan`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import ClassVar

from evalkit.load import conversation, shared_prefix
from evalkit.load.cache_metrics import metrics_hit_rate
from evalkit.load.cache_reset import reset_prefix_cache
from evalkit.load.measure import run_token_scale
from evalkit.load.records import LoadSettings, as_json, common_settings
from evalkit.load.session_summary import SESSIONS, measured_lines, read_sessions, session_totals
from evalkit.load.summary_records import CacheResetJson, LoadSummaryJson, SessionRecord, with_evidence
from evalkit.load.turns import TurnSender
from evalkit.load.workload import Lengths
from evalkit.progress import Progress
from evalkit.session.context import RunContext


@dataclass(frozen=True)
class ChatLengths:
    """What every chat workload's turns share: the lengths as given (N or LO:HI, parsed when the run starts), a cap
    on every answer (default: room for the whole count), the token scale (None: measured first) and timeout."""

    prompt_tokens: str = "256"
    output_tokens: str = "64"
    max_tokens: int | None = None
    token_scale: float | None = None
    timeout_s: float = 300.0

    def parsed(self) -> tuple[Lengths, Lengths]:
        """The prompt and output lengths."""
        return (
            Lengths.parse(self.prompt_tokens, "--prompt-tokens"),
            Lengths.parse(self.output_tokens, "--output-tokens"),
        )

    def settings(self, mode: str) -> LoadSettings:
        """The manifest's `load` head of a chat workload: the common lengths, its kind and cap."""
        out = common_settings(self.prompt_tokens, self.output_tokens, self.timeout_s)
        out["mode"] = mode
        out["max_tokens"] = self.max_tokens
        return out


@dataclass(frozen=True)
class ConversationPlan:
    """`--conversations USERS`: `users` chats of `turns` turns each, `think_s` apart."""

    errors_fail: ClassVar[bool] = True
    invalid_fails: ClassVar[bool] = False

    users: int
    turns: int = 3
    think_s: float = 0.0
    chat: ChatLengths = ChatLengths()

    def settings(self) -> LoadSettings:
        """What the manifest records of the run (`load`)."""
        out = self.chat.settings("conversation")
        out["users"], out["turns"], out["think_s"] = self.users, self.turns, self.think_s
        return out

    async def send(self, ctx: RunContext, seed: int) -> LoadSummaryJson:
        """Send every user's conversation at once and summarize them."""
        scale = await run_token_scale(ctx, self.chat.token_scale)
        prompt, output = self.chat.parsed()
        spec = conversation.ConversationSpec(
            self.users, self.turns, self.think_s, prompt, output, seed, scale, self.chat.max_tokens
        )
        await _run_turns(
            ctx,
            self.chat,
            self.users * self.turns,
            "conversation",
            lambda s: conversation.run_conversations(spec, s, ctx.clock),
        )
        summary = session_totals(ctx.rundir.path)
        summary["conversation"] = {
            **conversation.summarise(measured_lines(ctx.rundir.path), read_sessions(ctx.rundir.path), spec),
            "prefix_cache_metrics": metrics_hit_rate(ctx.rundir.path),
        }
        return with_evidence(summary, ctx.rundir.path)


@dataclass(frozen=True)
class SharedPrefixPlan:
    """`--shared-prefix GROUPS`: `groups` of `users_per_group` users sharing a `system_tokens`-token system prompt,
    run `cache_runs` (cold, warm or both) with `concurrency` requests at once."""

    errors_fail: ClassVar[bool] = True
    invalid_fails: ClassVar[bool] = False

    groups: int
    users_per_group: int = 4
    system_tokens: int = 512
    cache_runs: str = "both"  # cold | warm | both
    concurrency: int = 1
    chat: ChatLengths = ChatLengths()

    def settings(self) -> LoadSettings:
        """What the manifest records of the run (`load`)."""
        out = self.chat.settings("shared_prefix")
        out["groups"], out["users_per_group"] = self.groups, self.users_per_group
        out["system_tokens"], out["cache_runs"], out["concurrency"] = (
            self.system_tokens,
            self.cache_runs,
            self.concurrency,
        )
        return out

    async def send(self, ctx: RunContext, seed: int) -> LoadSummaryJson:
        """Send the groups' cold and warm runs and summarize them."""
        scale = await run_token_scale(ctx, self.chat.token_scale)
        prompt, output = self.chat.parsed()
        runs = ("cold", "warm") if self.cache_runs == "both" else (self.cache_runs,)
        total = self.groups * self.users_per_group * len(runs) + (self.groups if self.cache_runs == "warm" else 0)
        spec = shared_prefix.SharedPrefixSpec(
            self.groups,
            self.users_per_group,
            self.system_tokens,
            prompt,
            output,
            runs,
            self.concurrency,
            seed,
            scale,
            self.chat.max_tokens,
        )
        key = ctx.profile.api_key

        def reset() -> Awaitable[CacheResetJson]:
            return reset_prefix_cache(ctx.client.base_url, key)

        await _run_turns(
            ctx, self.chat, total, "shared_prefix", lambda s: shared_prefix.run_shared_prefix(spec, s, reset)
        )
        summary = session_totals(ctx.rundir.path)
        summary["shared_prefix"] = {
            **shared_prefix.summarise(measured_lines(ctx.rundir.path), read_sessions(ctx.rundir.path), spec),
            "prefix_cache_metrics": metrics_hit_rate(ctx.rundir.path),
        }
        return with_evidence(summary, ctx.rundir.path)


async def _run_turns(
    ctx: RunContext,
    chat: ChatLengths,
    total: int,
    kind: str,
    run: Callable[[TurnSender], Awaitable[list[SessionRecord]]],
) -> None:
    """Send a chat workload's turns through one sender (its progress bar `load KIND` of `total` requests), then
    write its sessions, read the server's counters after them and end the evidence (before the summary)."""
    sender = TurnSender(ctx.rundir, ctx.client, chat.timeout_s)
    sender.progress = Progress(total, f"load {kind}", "requests")
    try:
        records = await run(sender)
        await sender.flush()
    finally:
        sender.progress.close()
        sender.close()
    for rec in records:
        ctx.rundir.append(SESSIONS, as_json(rec))
    await ctx.evidence.snapshot(kind)
    await ctx.evidence.end()
