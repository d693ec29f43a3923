"""Conversations: N users, each holding a T-turn chat whose every turn carries the history with the server's answers.

User u's turn t asks `<own filler> Count from 1 to n ...` (lengths from `--prompt-tokens` and `--output-tokens`,
drawn from the seed), so every answer is still checked. The server's answer goes into the history verbatim (its
content, as received), then the user thinks for `--think-s` seconds before the next turn. Users run at once; a
user whose turn fails stops (the next turn would have no answer to carry). Each line is labelled `user`, `turn`
and `session`; per-turn and per-session latency and the prefix-cache hits the server reports (`cache_n`) are
summarised by `summarise`.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

from evalkit.client.prompts import GenQuestion
from evalkit.client.tokens import count_tokens
from evalkit.clock import Clock
from evalkit.load.metrics import dist
from evalkit.load.records import LoadLine
from evalkit.load.summary_records import ConversationJson, SessionFigures, SessionRecord, TurnFigures
from evalkit.load.turns import TurnSender, hit_rate
from evalkit.load.workload import Lengths, count_for, filler_text

_PER_MESSAGE = 4  # the sim's template cost of one message (evalkit/client/tokens.py)


@dataclass(frozen=True)
class ConversationSpec:
    """How many users, turns per user, the think time between turns and each turn's lengths."""

    users: int
    turns: int
    think_s: float
    prompt_tokens: Lengths
    output_tokens: Lengths
    seed: int = 42
    token_scale: float = 1.0
    max_tokens: int | None = None  # a cap on every answer (default: room for the whole count)


@dataclass(frozen=True)
class UserTurn:
    """One user message: its text and the count its answer must give."""

    text: str
    count_to: int

    @property
    def expected(self) -> str:
        """The exact answer."""
        return GenQuestion(self.count_to).answer

    @property
    def max_tokens(self) -> int:
        """Room for the count with a tokenizer that splits numbers finer than the sim's."""
        return 2 * count_tokens(self.expected) + 16


def user_turn(spec: ConversationSpec, user: int, turn: int) -> UserTurn:
    """User `user`'s message at turn `turn` (the same seed always gives the same text)."""
    rng = random.Random(f"conversation:{spec.seed}:{user}:{turn}")
    want = round(spec.prompt_tokens.draw(rng) / spec.token_scale)
    n = count_for(spec.output_tokens.draw(rng), user * spec.turns + turn)
    question = GenQuestion(n).text
    own = max(0, want - count_tokens(question) - _PER_MESSAGE)
    return UserTurn((filler_text(rng, own) + "\n\n" if own else "") + question, n)


async def run_conversations(spec: ConversationSpec, sender: TurnSender, clock: Clock) -> list[SessionRecord]:
    """Run every user's conversation at once; returns one record per session."""

    async def session(user: int) -> SessionRecord:
        messages: list[dict[str, str]] = []
        started = clock.now()
        done = 0
        for turn in range(spec.turns):
            ut = user_turn(spec, user, turn)
            messages.append({"role": "user", "content": ut.text})
            line, rec = await sender.send(
                list(messages),
                spec.max_tokens or ut.max_tokens,
                ut.expected,
                {"workload": "conversation", "user": user, "turn": turn, "session": f"user-{user}", "index": turn},
            )
            if line["outcome"] == "error":
                break
            done += 1
            messages.append({"role": "assistant", "content": rec.content})
            if turn + 1 < spec.turns and spec.think_s > 0:
                await asyncio.sleep(spec.think_s)
        return {"user": user, "turns_done": done, "started": started, "finished": clock.now()}

    return list(await asyncio.gather(*(session(u) for u in range(spec.users))))


def summarise(lines: list[LoadLine], sessions: list[SessionRecord], spec: ConversationSpec) -> ConversationJson:
    """The `conversation` figures: per turn, per session, and the cache hits the server reported."""
    turns: list[TurnFigures] = []
    for t in range(spec.turns):
        at = [r for r in lines if r.get("turn") == t]
        ok = [r for r in at if r.get("outcome") in ("correct", "wrong")]
        turns.append(
            {
                "turn": t,
                "requests": len(at),
                "errors": sum(r.get("outcome") == "error" for r in at),
                "wrong_answers": sum(r.get("outcome") == "wrong" for r in at),
                "ttft_s": dist(r.get("ttft_s") for r in ok),
                "e2e_s": dist(r.get("e2e_s") for r in ok),
                "prompt_tokens": dist(r.get("prompt_tokens") for r in ok),
                "prefix_cache": hit_rate(ok),
            }
        )
    by_user: dict[int, list[LoadLine]] = {}
    for r in lines:
        by_user.setdefault(int(r["user"]), []).append(r)
    per_session: list[SessionFigures] = []
    for s in sessions:
        mine = by_user.get(int(s["user"]), [])
        per_session.append(
            {
                "user": s["user"],
                "turns_done": s["turns_done"],
                "duration_s": s["finished"] - s["started"],
                "e2e_sum_s": sum(r.get("e2e_s") or 0.0 for r in mine),
            }
        )
    return {
        "users": spec.users,
        "turns": spec.turns,
        "think_s": spec.think_s,
        "per_turn": turns,
        "sessions": {
            "completed": sum(s["turns_done"] == spec.turns for s in sessions),
            "duration_s": dist(s["duration_s"] for s in per_session),
            "e2e_sum_s": dist(s["e2e_sum_s"] for s in per_session),
            "per_session": per_session,
        },
        "prefix_cache": hit_rate([r for r in lines if r.get("outcome") in ("correct", "wrong")]),
    }
