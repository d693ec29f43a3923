"""`evalkit load --conversations USERS` and `--shared-prefix GROUPS`: chats of several messages sent as users make
them (evalkit.load.chat_workloads sends them), with their own `conversation` or `shared_prefix` figures. Two
workloads of evalkit/commands/load_workloads.py."""

from __future__ import annotations

import argparse
from typing import cast

from evalkit.commands.load_workload_parts import LoadWorkload, ms, pct
from evalkit.commands.target_flags import run_options_from_args, target_from_args
from evalkit.config.argtypes import MAX_TURNS, MAX_USERS, bounded_int, nonneg_float, positive_int
from evalkit.load.chat_workloads import ChatLengths, ConversationPlan, SharedPrefixPlan
from evalkit.load.measure import LoadMeasurement, LoadPlan
from evalkit.load.summary_records import LoadSummaryJson
from evalkit.session.measurement import run_measurement


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of conversations and shared-prefix groups."""
    c = p.add_argument_group("conversations and shared-prefix groups")
    c.add_argument(
        "--conversations",
        type=bounded_int(1, MAX_USERS),
        metavar="USERS",
        help=f"USERS multi-turn chats at once (at most {MAX_USERS:,})",
    )
    c.add_argument(
        "--turns",
        type=bounded_int(1, MAX_TURNS),
        default=3,
        help=f"turns per conversation (default 3, at most {MAX_TURNS})",
    )
    c.add_argument("--think-s", type=nonneg_float, default=0.0, help="a user's pause between turns (default 0)")
    c.add_argument(
        "--max-tokens",
        type=positive_int,
        help="cap every answer of a conversation or shared-prefix run at N tokens (default: room for the count)",
    )
    c.add_argument(
        "--shared-prefix",
        type=bounded_int(1, MAX_USERS),
        metavar="GROUPS",
        help=f"GROUPS groups sharing a system prompt (at most {MAX_USERS:,})",
    )
    c.add_argument(
        "--users-per-group", type=bounded_int(1, MAX_USERS), default=4, help="users of each group (default 4)"
    )
    c.add_argument("--system-tokens", type=positive_int, default=512, help="each group's system prompt (default 512)")
    c.add_argument(
        "--cache-runs",
        choices=("cold", "warm", "both"),
        default="both",
        help="shared prefix: a cold run (cache emptied first where the server allows), a warm one, or both (default)",
    )


def run(args: argparse.Namespace) -> int:
    """Send the conversations or the shared-prefix groups."""
    chat = ChatLengths(args.prompt_tokens, args.output_tokens, args.max_tokens, args.token_scale, args.timeout_s)
    workload: ConversationPlan | SharedPrefixPlan
    if args.conversations:
        workload = ConversationPlan(args.conversations, args.turns, args.think_s, chat)
    else:
        workload = SharedPrefixPlan(
            args.shared_prefix, args.users_per_group, args.system_tokens, args.cache_runs, args.concurrency or 1, chat
        )
    return run_measurement(
        target_from_args(args),
        run_options_from_args(args),
        LoadMeasurement(LoadPlan(workload, seed=args.seed)),
        lambda s: print(session_table(cast(LoadSummaryJson, s.to_json())), flush=True),
    )


def session_table(s: LoadSummaryJson) -> str:
    """The table of a conversation or shared-prefix run, from its summary."""
    rows = []
    if "conversation" in s:
        c = s["conversation"]
        rows.append(f"conversations: {c['users']} users x {c['turns']} turns, think {c['think_s']:g} s")
        for t in c["per_turn"]:
            rows.append(
                f"turn {t['turn']}: {t['requests']} requests, ttft p50 {ms(t['ttft_s']['p50'])} ms, "
                f"e2e p50 {ms(t['e2e_s']['p50'])} ms, prefix cache {pct(t['prefix_cache']['hit_rate'])}"
            )
        rows.append(
            f"session duration p50 {ms(c['sessions']['duration_s']['p50'])} ms; "
            f"completed {c['sessions']['completed']} of {c['users']}"
        )
        cache = c["prefix_cache_metrics"]
    else:
        sp = s["shared_prefix"]
        rows.append(
            f"shared prefix: {sp['groups']} groups x {sp['users_per_group']} users, "
            f"{sp['system_tokens']}-token system prompts"
        )
        for r in sp["runs"]:
            reset = r["reset"]
            how = "" if reset is None else f" (reset: {reset['method'] if reset['reset'] else 'not possible'}"
            if "cold_verified" in r and r["cold_verified"] is not None:
                how += f"; cold by the server's figures: {'yes' if r['cold_verified'] else 'NO'}"
            how += ")" if reset is not None else ""
            rows.append(
                f"{r['run']}{how}: {r['requests']} requests, ttft p50 {ms(r['ttft_s']['p50'])} ms, "
                f"prefix cache {pct(r['prefix_cache']['hit_rate'])}"
            )
        cache = sp["prefix_cache_metrics"]
    if cache:
        rows.append(f"prefix cache over the run by the server's metrics: {pct(cache['hit_rate'])}")
    rows.append(f"errors {s['errors']}, wrong {s['wrong_answers']}")
    return "\n".join(rows)


WORKLOADS: tuple[LoadWorkload, ...] = (
    LoadWorkload("--conversations", "conversations", run),
    LoadWorkload("--shared-prefix", "shared_prefix", run, takes_concurrency=True),
)
